/**
 * The last step of every local engine's embeddings, so that a vector has the same shape whichever
 * engine made it.
 *
 * @module
 */

/**
 * `vector` cut to its first `dimensions` (when fewer than it has) and L2-normalised, unless
 * `normalize` is false (the legacy `/api/embeddings` wants it raw). A zero vector stays as it is.
 */
export function shapeEmbedding(vector: readonly number[], dimensions: number | undefined, normalize: boolean): number[] {
  const v = dimensions && dimensions > 0 && dimensions < vector.length ? vector.slice(0, dimensions) : [...vector];
  if (!normalize) return v;
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm > 0 ? v.map((x) => x / norm) : v;
}
