/**
 * `keep_alive` parsing with Ollama's rules: a JSON number is seconds (fractions allowed), a string is
 * a Go duration (`"5m"`, `"1h30m"`, `"300ms"`, `"-1m"`, `"0"`); anything negative means forever.
 * A unitless string other than `"0"` is an error, as in Go's `time.ParseDuration`.
 *
 * @module
 */
import { Errors } from 'lia/plugin';

/** Milliseconds to keep a model loaded; `Infinity` for forever, 0 to unload as soon as idle. */
export type KeepAliveMs = number;

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Parses a Go duration string into milliseconds; null when it is not one. */
export function parseGoDuration(text: string): number | null {
  const s = text.trim();
  const m = /^([+-]?)(.*)$/.exec(s);
  const sign = m?.[1] === '-' ? -1 : 1;
  const body = m?.[2] ?? '';
  if (body === '0') return 0;
  if (body === '') return null;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let total = 0;
  let consumed = 0;
  for (let p = part.exec(body); p; p = part.exec(body)) {
    total += Number(p[1]) * (UNIT_MS[p[2] as string] as number);
    consumed = part.lastIndex;
  }
  return consumed === body.length ? sign * total : null;
}

/**
 * Converts a request's `keep_alive` to milliseconds. `undefined` stays undefined (the caller keeps
 * the current value or the default); a bad value is a 400 naming the field.
 */
export function parseKeepAlive(value: unknown): KeepAliveMs | undefined {
  if (value === undefined || value === null) return undefined;
  let ms: number | null;
  if (typeof value === 'number' && Number.isFinite(value)) ms = value * 1000;
  else if (typeof value === 'string') {
    ms = parseGoDuration(value);
    if (ms === null) throw Errors.badRequest(`invalid keep_alive: time: invalid duration ${JSON.stringify(value)}`, { param: 'keep_alive' });
  } else throw Errors.badRequest(`invalid keep_alive: unsupported type ${typeof value}`, { param: 'keep_alive' });
  return ms < 0 ? Infinity : ms;
}
