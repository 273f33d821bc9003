/**
 * `GET /system/logs?service=svc-inference&lines=200`: the last lines of one service, oldest first,
 * as `{timestamp, priority, message}`. `lines` defaults to 100 and is clamped to 1–10000; an
 * unknown service or a `lines` that is not a whole number is a 400.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Errors, type ServiceRegistry } from 'lia/plugin';
import type { ServiceManager } from '../public.js';

/** `lines` when the query has none. */
export const LINES_DEFAULT = 100;
/** Largest `lines` answered; larger values are clamped to it. */
export const LINES_MAX = 10_000;

/** Parses and clamps `lines`; throws 400 for anything but a whole number. */
export function parseLines(raw: string | undefined): number {
  if (raw === undefined || raw === '') return LINES_DEFAULT;
  if (!/^-?\d+$/.test(raw.trim())) throw Errors.badRequest(`"lines" must be a whole number (1-${LINES_MAX}), not "${raw}"`, { param: 'lines' });
  const n = Number(raw);
  if (n < 0) throw Errors.badRequest(`"lines" must be a whole number (1-${LINES_MAX}), not "${raw}"`, { param: 'lines' });
  return Math.min(LINES_MAX, Math.max(1, n));
}

/** The query: each parameter at most once (`lines=1&lines=2` is a 400, not two values). */
const LogsQuery = Type.Object({ service: Type.Optional(Type.String()), lines: Type.Optional(Type.String()) });

/** Registers `GET /system/logs`. */
export function logsRoutes(app: FastifyInstance, manager: () => ServiceManager, services: Pick<ServiceRegistry, 'has' | 'names'>): void {
  app.get<{ Querystring: { service?: string; lines?: string } }>(
    '/system/logs',
    { config: { scope: 'system:read' }, schema: { querystring: LogsQuery } },
    async (request, reply) => {
      const { service } = request.query;
      if (!service) throw Errors.badRequest(`missing "service"; one of: ${services.names().join(', ')}`, { param: 'service' });
      if (!services.has(service)) throw Errors.badRequest(`unknown service "${service}"; one of: ${services.names().join(', ')}`, { param: 'service' });
      const lines = parseLines(request.query.lines);
      const m = manager();
      const entries = await m.logs(service, lines);
      return reply.header('Cache-Control', 'no-store').send({ service, source: m.kind === 'systemd' ? 'journal' : 'embedded', lines: entries });
    },
  );
}
