/**
 * "No broader than": a key may create or rotate (and so receive the secret of) only keys that are
 * no broader than itself in every dimension. A key's breadth is its scopes, its model allow-list,
 * each of its limits and its expiry; the first dimension in which the other key is broader is
 * named in the 403.
 *
 * - **Scopes**: each scope of the other key is granted by the holder's (`grants`: `*` grants all,
 *   `<area>:write|admin` grants `<area>:read`).
 * - **Models**: a holder without a list holds every model. Otherwise the other key needs a list,
 *   and each of its patterns must be provably inside one of the holder's patterns (see
 *   {@link patternWithin}); a pattern that cannot be proved inside is refused, even where it
 *   happens to name the same models.
 * - **Limits** (`requests_per_minute`, `tokens_per_minute`, `concurrent_streams`): where the
 *   holder has a limit, the other key needs the same limit at most as large; a missing limit is
 *   unlimited, so broader.
 * - **Expiry**: where the holder expires, the other key must expire no later.
 *
 * @module
 */
import { grants } from 'lia/utils';
import type { KeyLimits } from './rate-limits.js';

/** What is compared of a key (the holder's or the other's). */
export interface Breadth {
  scopes: readonly string[];
  models: readonly string[] | null;
  limits: KeyLimits | null;
  /** Milliseconds since the epoch; Infinity: never. */
  expiresAt: number;
}

/** A key with every scope, every model, no limits and no expiry (the master key). */
export const UNBOUNDED: Breadth = Object.freeze({ scopes: Object.freeze(['*']), models: null, limits: null, expiresAt: Infinity });

const LIMITS = ['requests_per_minute', 'tokens_per_minute', 'concurrent_streams'] as const;

/**
 * Whether every name the glob `inner` matches is matched by the glob `outer` (both as
 * `modelAllowed` (allow-list.ts) reads them: `*` any run, `?` one character, case-insensitive). A sound, partial
 * check: `inner` is read as a sequence of literals, `?` and `*`; a literal of `outer` must meet the
 * same literal, its `?` one literal or `?`, and its `*` any run of them, while a `*` of `inner`
 * can only be met by a `*` of `outer`. So `stories-*` is inside `stories*`, `a?c` inside `a*`,
 * `llama3` inside `llama3`; `stories*` is not inside `stories-*`, and `[ab]`-style classes do not
 * exist. A pattern without a tag also admits `<name>:latest`; since the two patterns are compared
 * as strings, that rule holds for both alike.
 */
export function patternWithin(inner: string, outer: string): boolean {
  const a = inner.toLowerCase();
  const b = outer.toLowerCase();
  // ok[i][j]: inner[i..] is inside outer[j..]. Filled from the ends (patterns are at most 200 characters).
  const ok: boolean[][] = Array.from({ length: a.length + 1 }, () => new Array<boolean>(b.length + 1).fill(false));
  ok[a.length]![b.length] = true;
  for (let j = b.length - 1; j >= 0; j--) ok[a.length]![j] = b[j] === '*' && ok[a.length]![j + 1]!;
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      const x = a[i]!;
      const y = b[j]!;
      if (y === '*') ok[i]![j] = ok[i]![j + 1]! || ok[i + 1]![j]!;
      else if (x === '*') ok[i]![j] = false;
      else if (y === '?') ok[i]![j] = ok[i + 1]![j + 1]!;
      else ok[i]![j] = x === y && ok[i + 1]![j + 1]!;
    }
  }
  return ok[0]![0]!;
}

/**
 * The first dimension in which `other` is broader than `holder`, as a sentence for the 403, or
 * null when it is no broader in any.
 */
export function broaderIn(other: Breadth, holder: Breadth): string | null {
  const scopes = other.scopes.filter((s) => !grants(holder.scopes, s));
  if (scopes.length > 0) return `scopes: it would hold ${scopes.map((s) => `"${s}"`).join(', ')}, which this API key lacks`;
  if (holder.models !== null) {
    if (other.models === null) return `models: it would use every model, and this API key is limited to ${JSON.stringify(holder.models)}`;
    const outside = other.models.filter((p) => !holder.models!.some((q) => patternWithin(p, q)));
    if (outside.length > 0) return `models: ${outside.map((p) => `"${p}"`).join(', ')} is not provably inside this API key's ${JSON.stringify(holder.models)}`;
  }
  for (const limit of LIMITS) {
    const mine = holder.limits?.[limit];
    if (mine === undefined) continue;
    const theirs = other.limits?.[limit];
    if (theirs === undefined) return `limits: it would have no ${limit}, and this API key has ${mine}`;
    if (theirs > mine) return `limits: its ${limit} ${theirs} is above this API key's ${mine}`;
  }
  if (other.expiresAt > holder.expiresAt) {
    const when = Number.isFinite(other.expiresAt) ? `expire at ${new Date(other.expiresAt).toISOString()}` : 'never expire';
    return `expires_at: it would ${when}, after this API key (${new Date(holder.expiresAt).toISOString()})`;
  }
  return null;
}
