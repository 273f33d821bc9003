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

/** The interquartile range over the median: the run-to-run spread the benchmarks report beside a median. */
export function spread(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))]!;
  return (q(0.75) - q(0.25)) / median(s);
}
