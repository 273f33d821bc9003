/**
 * Sentence-embedding pooling, as sentence-transformers does it: by default average the token
 * vectors of each input over its real tokens (attention mask 1); models whose folder says so
 * (`1_Pooling/config.json`) take the first token (`cls`, BGE-style) or the last real token
 * instead. Then L2-normalise, and optionally keep only the first N dimensions and normalise again
 * (Matryoshka truncation, what Ollama's `dimensions` does). Pure functions over flat
 * `Float32Array`s.
 *
 * @module
 */

/** How token vectors become one vector. */
export type Pooling = 'mean' | 'cls' | 'lasttoken';

/**
 * Pools a `[batch, tokens, width]` tensor: `mean` over the tokens whose mask is 1 (see
 * {@link meanPool}), `cls` the first real token, `lasttoken` the last real token.
 */
export function pool(hidden: Float32Array, dims: readonly number[], mask: Uint8Array, mode: Pooling): Float32Array[] {
  if (mode === 'mean') return meanPool(hidden, dims, mask);
  const [batch = 0, tokens = 0, width = 0] = dims;
  const out: Float32Array[] = [];
  for (let b = 0; b < batch; b++) {
    let pick = -1;
    for (let t = 0; t < tokens; t++) {
      if (mask[b * tokens + t] === 0) continue;
      pick = t;
      if (mode === 'cls') break;
    }
    const start = (b * tokens + Math.max(pick, 0)) * width;
    out.push(pick < 0 ? new Float32Array(width) : hidden.slice(start, start + width));
  }
  return out;
}

/**
 * Mean-pools a `[batch, tokens, width]` tensor over the tokens whose mask is 1.
 * Sums in double precision, returns one float32 vector per row. A row without a single real
 * token (cannot come from a tokenizer that adds special tokens) yields a zero vector.
 */
export function meanPool(hidden: Float32Array, dims: readonly number[], mask: Uint8Array): Float32Array[] {
  const [batch = 0, tokens = 0, width = 0] = dims;
  if (hidden.length !== batch * tokens * width || mask.length !== batch * tokens) {
    throw new Error(`mean pooling got ${hidden.length} values and ${mask.length} mask cells for shape [${dims.join(', ')}]`);
  }
  const out: Float32Array[] = [];
  const sum = new Float64Array(width);
  for (let b = 0; b < batch; b++) {
    sum.fill(0);
    let count = 0;
    for (let t = 0; t < tokens; t++) {
      if (mask[b * tokens + t] === 0) continue;
      count++;
      const base = (b * tokens + t) * width;
      for (let d = 0; d < width; d++) sum[d]! += hidden[base + d]!;
    }
    const vec = new Float32Array(width);
    if (count > 0) for (let d = 0; d < width; d++) vec[d] = sum[d]! / count;
    out.push(vec);
  }
  return out;
}

/** Scales `vec` to unit L2 norm in place (a zero vector stays zero) and returns it. */
export function normalize(vec: Float32Array): Float32Array {
  let sq = 0;
  for (let i = 0; i < vec.length; i++) sq += vec[i]! * vec[i]!;
  const norm = Math.sqrt(sq);
  // Same floor as torch.nn.functional.normalize, so near-zero vectors do not blow up.
  const scale = 1 / Math.max(norm, 1e-12);
  for (let i = 0; i < vec.length; i++) vec[i] = vec[i]! * scale;
  return vec;
}

/**
 * The vector as clients receive it. Normalised (the default): unit length, and with
 * `dimensions` smaller than the width only the first `dimensions` values, normalised again.
 * Not normalised (the legacy `/api/embeddings`): the raw mean, cut to `dimensions` as it is.
 * JS numbers that are exactly the float32 values, so a base64 (float32) encoding loses nothing.
 */
export function finish(vec: Float32Array, dimensions?: number, normalized = true): number[] {
  const cut = dimensions !== undefined && dimensions > 0 && dimensions < vec.length ? vec.subarray(0, dimensions) : vec;
  return Array.from(normalized ? normalize(cut) : cut);
}
