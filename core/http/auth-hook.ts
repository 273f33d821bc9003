/**
 * The authentication gate. It runs on every request, matched or not, before body parsing. A
 * request passes without credentials only when the route it matched declares
 * `config: { public: true }`; the decision rests on the route, not on the spelling of the path,
 * so `//`, `/./`, `..`, `%2F`, case or a trailing slash cannot reach a protected handler
 * unauthenticated. Unknown paths need a key too (default deny), so they cannot be probed.
 *
 * After authenticating, the gate checks the principal's scopes against the scope the route
 * declares (`config: { scope }`, rules in `./scopes.ts`) and refuses a principal lacking it with
 * 403, naming the scope needed. A non-public route without a declared scope needs `*`. Unknown
 * paths only need a principal; they answer 404/405 whatever its scopes.
 *
 * @module
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Principal } from '../contracts/auth.js';
import { Errors } from '../errors.js';
import type { Hooks } from '../plugin/hooks.js';
import { markAuthenticated } from './connections.js';
import { isConsoleOffRequest } from './console-off.js';
import { runAs } from './request-principal.js';
import { grants, requiredScope } from './scopes.js';
import './route-config.js';

/**
 * Asks every strategy; the first that admits the request wins, so the order in which plugins set
 * up does not decide whether a credential is accepted. When none admits it, the reason of the
 * first strategy that called the credential wrong is the answer.
 */
export async function authenticate(request: FastifyRequest, hooks: Hooks): Promise<Principal> {
  let invalid: string | null = null;
  for (const strategy of hooks.auth.list()) {
    const result = await strategy.authenticate(request);
    if (result.kind === 'ok') return result.principal;
    if (result.kind === 'invalid') invalid ??= result.reason;
  }
  if (invalid !== null) throw Errors.unauthorized(invalid);
  if (hooks.auth.list().length === 0) throw Errors.unauthorized('no authentication strategy is enabled; this route is closed');
  if (request.headers.authorization !== undefined) {
    throw Errors.unauthorized('unsupported Authorization header: expected "Bearer <key>"');
  }
  throw Errors.unauthorized('missing API key: send the header "Authorization: Bearer <key>"');
}

export function installAuthGate(app: FastifyInstance, hooks: Hooks): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config?.public === true && request.is404 !== true) return;
    // The "console switched off" page (webui disabled) is as public as the console itself.
    if (isConsoleOffRequest(request)) return;
    request.principal = await authenticate(request, hooks);
    // The connection has shown a key: it leaves the cap on unauthenticated connections.
    markAuthenticated(request.raw.socket);
    if (request.is404 === true) return;
    const needed = requiredScope(request.routeOptions.config?.scope);
    if (!(request.principal.hasScope ? request.principal.hasScope(needed) : grants(request.principal.scopes, needed))) {
      throw Errors.forbidden(`this API key lacks the scope "${needed}" that ${request.method} ${request.routeOptions.url} needs`);
    }
  });
  // The handler (and all it awaits, e.g. the engine) runs on behalf of the principal, which
  // `currentPrincipal()` returns there. Last in the chain, after the body is parsed, since body
  // parsing runs on the socket's events, outside any context entered earlier.
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.principal) runAs(request.principal, done);
    else done();
  });
}
