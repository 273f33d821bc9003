/**
 * Byte counts for people, in decimal units as Ollama's CLI prints them: `999 B`, `1.2 MB`,
 * `71.0 MB`, `134 MB`, `4.7 GB` (one decimal below 100 of a unit, none from 100 up).
 *
 * @module
 */

const UNITS = ['B', 'KB', 'MB', 'GB', 'TB'] as const;

export function formatBytes(n: number): string {
  let i = 0;
  let v = n;
  while (v >= 1000 && i < UNITS.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(v >= 100 ? 0 : 1)} ${UNITS[i]}`;
}
