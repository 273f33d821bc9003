/**
 * `GET /system/services` and `POST /system/services/{name}/` with the action as a JSON body
 * `{"action": "restart"}`, a query `?action=restart`, or a last path segment
 * `/system/services/{name}/restart`. Unknown service 404, unknown or missing action 400, two
 * different actions in one request 400. Stopping the API or the proxy in front of it would lock
 * the operator out: 409 unless `"force": true`. Acting on the service that serves this request
 * (restart, or a forced stop) answers 202 first and acts once the response is out; so does a
 * manager that only queues jobs (systemd). Otherwise the answer is 200 with the new state.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Errors, type ServiceRegistry } from 'lia/plugin';
import type { ServiceName } from 'lia/plugin/contracts';
import type { ServiceAction, ServiceManager } from '../public.js';

const ACTIONS: readonly ServiceAction[] = ['start', 'stop', 'restart'];

/** Services that carry this very request: stopping them locks the operator out. */
export const SELF_SERVICES: readonly ServiceName[] = ['svc-system-api', 'svc-proxy'];

interface ActionRequest {
  Params: { name: string; action?: string };
  Querystring: { action?: string; force?: string };
  Body: unknown;
}

/** The query of an action: each parameter at most once. */
const ActionQuery = Type.Object({ action: Type.Optional(Type.String()), force: Type.Optional(Type.String()) });

function truthy(value: unknown): boolean {
  return value === true || value === 'true' || value === '1';
}

/** The action and force flag from path, query and body; throws 400 on a missing, unknown or contradictory action. */
export function readAction(request: FastifyRequest<ActionRequest>): { action: ServiceAction; force: boolean } {
  const body = request.body;
  if (body !== undefined && body !== null && (typeof body !== 'object' || Array.isArray(body))) {
    throw Errors.badRequest('the body must be a JSON object such as {"action": "restart"}');
  }
  const b = (body ?? {}) as { action?: unknown; force?: unknown };
  if (b.action !== undefined && typeof b.action !== 'string') throw Errors.badRequest('"action" must be a string: start, stop or restart');
  if (b.force !== undefined && typeof b.force !== 'boolean') throw Errors.badRequest('"force" must be true or false');
  const given = [request.params.action, request.query.action, b.action].filter((a): a is string => a !== undefined && a !== '');
  const distinct = [...new Set(given)];
  if (distinct.length === 0) {
    throw Errors.badRequest('missing action: send {"action": "start" | "stop" | "restart"}, ?action=..., or POST /system/services/{name}/{action}');
  }
  if (distinct.length > 1) throw Errors.badRequest(`conflicting actions in one request: ${distinct.join(', ')}`);
  const action = distinct[0] as string;
  if (!(ACTIONS as readonly string[]).includes(action)) {
    throw Errors.badRequest(`unknown action "${action}"; use one of: ${ACTIONS.join(', ')}`, { param: 'action' });
  }
  return { action: action as ServiceAction, force: b.force === true || truthy(request.query.force) };
}

/** Registers `GET /system/services` and the action routes. */
export function servicesRoutes(app: FastifyInstance, manager: () => ServiceManager, services: Pick<ServiceRegistry, 'has' | 'names'>): void {
  app.get('/system/services', { config: { scope: 'system:read' } }, async (_request, reply) => {
    const m = manager();
    return reply.header('Cache-Control', 'no-store').send({ manager: m.kind, services: await m.list() });
  });

  const handler = async (request: FastifyRequest<ActionRequest>, reply: FastifyReply) => {
    const { name } = request.params;
    if (!services.has(name)) throw Errors.notFound(`no such service "${name}"; services: ${services.names().join(', ')}`);
    const { action, force } = readAction(request);
    const self = SELF_SERVICES.includes(name);
    if (self && action === 'stop' && !force) {
      throw Errors.conflict(`stopping ${name} would cut off this API (and the operator with it); send {"action": "stop", "force": true} to do it anyway`);
    }
    const m = manager();
    const body = { service: name, action, status: 'accepted' as string, manager: m.kind };
    if (self && (action === 'restart' || action === 'stop')) {
      // The request runs through this service: answer first, act once the bytes are out.
      reply.raw.once('finish', () => {
        setTimeout(() => {
          m.act(name, action).catch((err: unknown) => request.log.error({ err, service: name, action }, 'deferred service action failed'));
        }, 50);
      });
      return reply.code(202).header('Location', '/system/services').send(body);
    }
    await m.act(name, action);
    if (m.queuesActions)
      return reply
        .code(202)
        .header('Location', '/system/services')
        .send({ ...body, status: 'queued' });
    const state = (await m.list()).find((s) => s.name === name);
    return reply.code(200).send({ ...body, status: 'done', state });
  };
  app.post('/system/services/:name', { config: { scope: 'system:admin' }, schema: { querystring: ActionQuery } }, handler);
  app.post('/system/services/:name/:action', { config: { scope: 'system:admin' }, schema: { querystring: ActionQuery } }, handler);
}
