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

const compiled = new Map<string, RegExp>();

function globToRegExp(pattern: string): RegExp {
  let re = compiled.get(pattern);
  if (!re) {
    const body = pattern
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')
      .replace(/\?/g, '.');
    re = new RegExp(`^${body}$`, 'i');
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(pattern, re);
  }
  return re;
}

/**
 * Whether a key's model allow-list admits `model`: null admits all; otherwise a glob pattern
 * (`*` any run of characters, `?` one, case-insensitive) must match the name, or the name without
 * its `:latest` tag (so `llama3` admits `llama3:latest`).
 */
export function modelAllowed(patterns: readonly string[] | null | undefined, model: string): boolean {
  if (!patterns) return true;
  const bare = model.endsWith(':latest') ? model.slice(0, -':latest'.length) : null;
  return patterns.some((p) => {
    const re = globToRegExp(p);
    return re.test(model) || (bare !== null && re.test(bare));
  });
}
