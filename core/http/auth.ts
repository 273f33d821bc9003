/**
 * The authentication gate. It runs on every request, matched or not, before body parsing. A
 * request passes without credentials only when the route it matched declares
 * `config: { public: true }`; the decision rests on the route, not on the spelling of the path,
 * so `//`, `/./`, `..`, `%2F`, case or a trailing slash cannot reach a protected handler
 * unauthenticated. Unknown paths need a key too (default deny), so they cannot be probed.
 *
 * After authenticating, the gate checks the principal's scopes against the scope the route
 * declares (`config: { scope }`, the rules below) and refuses a principal lacking it with 403,
 * naming the scope needed. Unknown paths only need a principal; they answer 404/405 whatever its
 * scopes. The handler then runs on behalf of the principal (`currentPrincipal`, below).
 *
 * Route scopes: every route names the one scope it needs in its options
 * (`config: { scope: 'models:read' }`). The rule lives here so the gate, the route table and the
 * docs agree; the vocabulary belongs to the routes and to the strategy that issues keys.
 * - `*` grants everything (the master key holds it).
 * - A scope `<area>:<level>` whose level is not `read` also grants `<area>:read`: `models:write`
 *   grants `models:read`, `system:admin` grants `system:read`. Nothing else implies anything;
 *   in particular `inference` does not grant `models:read` (a client that lists models before
 *   chatting holds both).
 * - A non-public route that declares no scope needs `*`: a route that forgets its scope is
 *   closed to every scoped key rather than open to all of them.
 * Plugins may declare scopes of their own (e.g. `hello:read`); the rule applies to them too.
 *
 * The principal of the request being handled is there for code that runs on its behalf without
 * seeing the request (the inference engine, called by every surface): the gate enters it before
 * the handler runs (an `AsyncLocalStorage`), so whatever the handler awaits sees it too; outside
 * an HTTP request it is null. This covers every surface, including plugins' own, without each
 * having to pass the principal along (a surface that forgot would bypass the model allow-list).
 * The cost: every promise pays a little more once an `AsyncLocalStorage` is in use, a few µs per
 * request (bench/results/2026-11-27-code-notes.md). A principal answers for the models it may use
 * (`Principal.mayUse`); the rule behind the answer belongs to the strategy that made it.
 *
 * @module
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../contracts/auth.js';
import { Errors } from '../errors.js';
import type { Hooks } from '../plugin/hooks.js';
import { markAuthenticated } from './connections.js';
import { isConsoleOffRequest } from './console-off.js';
import './route-config.js';

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

const current = new AsyncLocalStorage<Principal>();

/** The principal of the request in whose handler this runs, or null. */
export function currentPrincipal(): Principal | null {
  return current.getStore() ?? null;
}

/**
 * Whether `principal` may use `model`: its own answer (`Principal.mayUse`, e.g. the glob allow-list
 * of `auth-api-key`'s named keys); without one, every model, unless it carries a `models` list it
 * cannot answer for, which admits none (fail closed). Outside a request (null), every model.
 */
export function mayUse(principal: Principal | null, model: string): boolean {
  if (!principal) return true;
  if (principal.mayUse) return principal.mayUse(model);
  return principal.models === undefined || principal.models === null;
}

/**
 * Refuses (403, naming the model and `param`) a name outside the current principal's allow-list;
 * outside a request, or for a principal without a list, every name passes. Routes that name a
 * model call it on the name asked, before the store is asked, so the answer says nothing of which
 * models exist outside the list.
 */
export function checkModelAllowed(model: string, param = 'model'): void {
  if (!mayUse(currentPrincipal(), model)) {
    throw Errors.forbidden(`this API key may not use the model "${model}"`, { param });
  }
}

/** Whether the current principal may use `model` (for filtering listings). */
export function principalMayUse(model: string): boolean {
  return mayUse(currentPrincipal(), model);
}

/**
 * Asks every strategy; the first that admits the request wins, so the order in which plugins set
 * up does not decide whether a credential is accepted. When none admits it, the reason of the
 * first strategy that called the credential wrong is the answer.
 */
export async function authenticate(request: FastifyRequest, hooks: Hooks, strategies = hooks.auth.list()): Promise<Principal> {
  let invalid: string | null = null;
  for (const strategy of strategies) {
    const result = await strategy.authenticate(request);
    if (result.kind === 'ok') return result.principal;
    if (result.kind === 'invalid') invalid ??= result.reason;
  }
  if (invalid !== null) throw Errors.unauthorized(invalid);
  if (strategies.length === 0) throw Errors.unauthorized('no authentication strategy is enabled; this route is closed');
  if (request.headers.authorization !== undefined) {
    throw Errors.unauthorized('unsupported Authorization header: expected "Bearer <key>"');
  }
  throw Errors.unauthorized('missing API key: send the header "Authorization: Bearer <key>"');
}

export function installAuthGate(app: FastifyInstance, hooks: Hooks): void {
  app.decorateRequest('principal', null);
  const strategies = hooks.auth.list(); // the live list (see Registry.list)
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config?.public === true && request.is404 !== true) return;
    // The "console switched off" page (webui disabled) is as public as the console itself; it is
    // only ever an unmatched path.
    if (request.is404 === true && isConsoleOffRequest(request)) return;
    request.principal = await authenticate(request, hooks, strategies);
    // The connection has shown a key: it leaves the cap on unauthenticated connections.
    markAuthenticated(request.raw.socket);
    if (request.is404 === true) return;
    // A non-public route that declares no scope needs every scope.
    const needed = request.routeOptions.config?.scope ?? ALL_SCOPES;
    if (!(request.principal.hasScope ? request.principal.hasScope(needed) : grants(request.principal.scopes, needed))) {
      throw Errors.forbidden(`this API key lacks the scope "${needed}" that ${request.method} ${request.routeOptions.url} needs`);
    }
  });
  // The handler (and all it awaits, e.g. the engine) runs on behalf of the principal, which
  // `currentPrincipal()` returns there. Last in the chain, after the body is parsed, since body
  // parsing runs on the socket's events, outside any context entered earlier.
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.principal) current.run(request.principal, done);
    else done();
  });
}
