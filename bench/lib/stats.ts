/**
 * Statistics the benchmarks share.
 *
 * @module
 */

/** The median of `xs` (the mean of the two middle values for an even count); NaN when empty. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}
