/**
 * What a named key may hold: the scopes of the built-in routes, and the rule of its model
 * allow-list. Core knows neither: its auth gate asks a principal for a route's scope (the
 * implication rule of `grants`), and the engine asks it `mayUse(model)`; a named key's principal
 * answers with {@link modelAllowed}.
 *
 * @module
 */

/** The scopes a named key may hold: those of the built-in routes (docs/security.md). */
export const KEY_SCOPES = ['inference', 'models:read', 'models:write', 'system:read', 'system:admin', 'keys:admin'] as const;

/**
 * Whether glob `pattern` (`*` any run of characters, `?` one) matches all of `text`, both already
 * lower-cased. Greedy, going back only to the last `*` seen: at most pattern × text steps, where
 * a regular expression of many stars backtracks exponentially on a near miss (docs/security.md).
 */
function globMatch(pattern: string, text: string): boolean {
  let p = 0;
  let s = 0;
  let star = -1;
  let resume = 0;
  while (s < text.length) {
    if (p < pattern.length && (pattern[p] === '?' || pattern[p] === text[s])) {
      p++;
      s++;
    } else if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      resume = s;
    } else if (star >= 0) {
      p = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
}

/**
 * Whether a key's model allow-list admits `model`: null admits all; otherwise a glob pattern
 * (`*` any run of characters, `?` one, case-insensitive) must match the name, or the name without
 * its `:latest` tag (so `llama3` admits `llama3:latest`).
 */
export function modelAllowed(patterns: readonly string[] | null | undefined, model: string): boolean {
  if (!patterns) return true;
  const name = model.toLowerCase();
  const bare = name.endsWith(':latest') ? name.slice(0, -':latest'.length) : null;
  return patterns.some((p) => {
    const pattern = p.toLowerCase();
    return globMatch(pattern, name) || (bare !== null && globMatch(pattern, bare));
  });
}
