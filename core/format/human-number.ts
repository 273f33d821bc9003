/**
 * Counts for people as Ollama prints parameter sizes (its `format.HumanNumber`): 292800 → `293K`,
 * 124.6M → `124.60M`, 3.2B → `3.2B`. Format handlers of several backends use it for
 * `details.parameter_size`.
 *
 * @module
 */

export function humanNumber(n: number): string {
  if (n >= 1e9) {
    const v = n / 1e9;
    return Number.isInteger(v) ? `${v}B` : `${v.toFixed(1)}B`;
  }
  if (n >= 1e6) {
    const v = n / 1e6;
    return Number.isInteger(v) ? `${v}M` : `${v.toFixed(2)}M`;
  }
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`;
  return String(n);
}
