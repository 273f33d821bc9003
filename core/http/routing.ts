/**
 * The route table: every route any plugin registered, kept in a find-my-way router of our own so
 * the not-found handler can tell "no such path" (404) from "wrong method" (405 with `Allow`), and
 * so the auth and scope tests can walk every route with the scope each one declares.
 *
 * @module
 */
import FindMyWay from 'find-my-way';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors } from '../errors.js';
import { CONSOLE_OFF_PAGE, isConsoleOffRequest } from './console-off.js';

export interface RouteInfo {
  method: string;
  url: string;
  public: boolean;
  /** The scope the route declares (`config.scope`); null when it declares none. */
  scope: string | null;
}

export class RouteTable {
  readonly #router = FindMyWay({ ignoreTrailingSlash: true, ignoreDuplicateSlashes: true });
  readonly #routes: RouteInfo[] = [];

  add(route: RouteInfo): void {
    this.#routes.push(route);
    if (route.method === 'HEAD') return;
    try {
      this.#router.on(route.method as FindMyWay.HTTPMethod, route.url, () => undefined);
    } catch {
      // Already known under another spelling; the fastify router is the authority.
    }
  }

  list(): readonly RouteInfo[] {
    return this.#routes;
  }

  /** Methods that would match this path. */
  methodsFor(path: string): string[] {
    const methods = new Set<string>();
    for (const r of this.#routes) {
      if (r.method === 'HEAD') continue;
      if (this.#router.find(r.method as FindMyWay.HTTPMethod, path)) methods.add(r.method);
    }
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  }
}

/** Records routes as they are added and answers 404/405 for the rest. */
export function installRouting(app: FastifyInstance, table: RouteTable): void {
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const config = route.config;
    const isPublic = config?.public === true;
    const scope = config?.scope ?? null;
    for (const method of methods) table.add({ method: String(method), url: route.url, public: isPublic, scope });
  });
  app.setNotFoundHandler(async (request: FastifyRequest, reply: FastifyReply) => {
    if (isConsoleOffRequest(request)) return reply.code(404).type('text/html; charset=utf-8').header('Cache-Control', 'no-cache').send(CONSOLE_OFF_PAGE);
    const path = request.url.split('?', 1)[0] ?? '/';
    const allowed = table.methodsFor(path);
    if (allowed.length > 0) {
      throw Errors.methodNotAllowed(`method ${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`, {
        headers: { Allow: allowed.join(', ') },
      });
    }
    throw Errors.notFound(`no such path: ${request.method} ${path}`);
  });
}
