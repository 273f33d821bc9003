/**
 * Route scopes: what a principal may do. Every route names the one scope it needs in its options
 * (`config: { scope: 'models:read' }`); core's auth gate refuses, with 403, a principal that does
 * not hold it (or that answers `hasScope` false). The rule lives here so the gate, the route table
 * and the docs agree; the vocabulary belongs to the routes and to the strategy that issues keys.
 *
 * - `*` grants everything (the master key holds it).
 * - A scope `<area>:<level>` whose level is not `read` also grants `<area>:read`: `models:write`
 *   grants `models:read`, `system:admin` grants `system:read`. Nothing else implies anything;
 *   in particular `inference` does not grant `models:read` (a client that lists models before
 *   chatting holds both).
 * - A non-public route that declares no scope needs `*`: a route that forgets its scope is
 *   closed to every scoped key rather than open to all of them.
 *
 * Plugins may declare scopes of their own (e.g. `hello:read`); the rule above applies to them too.
 *
 * @module
 */

/** Every scope: granted to the master key, needed by non-public routes that declare none. */
export const ALL_SCOPES = '*';

/**
 * A scope: `*` or any scope a plugin's routes declare (`models:read`, `hello:read`); the
 * built-in plugins' scopes are listed by `auth-api-key`, which issues keys holding them.
 */
export type Scope = typeof ALL_SCOPES | (string & {});

/** The read scope implied by `scope` (`models:write` → `models:read`), or null. */
function impliedRead(scope: string): string | null {
  const colon = scope.lastIndexOf(':');
  if (colon <= 0 || scope.slice(colon + 1) === 'read') return null;
  return `${scope.slice(0, colon)}:read`;
}

/** Whether a principal holding `held` may use a route needing `needed`. */
export function grants(held: readonly string[], needed: string): boolean {
  return held.some((s) => s === ALL_SCOPES || s === needed || impliedRead(s) === needed);
}

/** The scope a non-public route needs: its declared one, else `*`. */
export function requiredScope(declared: string | undefined): string {
  return declared ?? ALL_SCOPES;
}
