/**
 * `GET /system/status`: the status sampler's cached figures, with the host name of the network
 * provider. The response schema is the interface's, exactly; it also compiles a fast serializer.
 *
 * @module
 */
import os from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Hooks } from 'lia/plugin';
import { VERSION } from 'lia/utils';
import type { StatusSampler } from '../status/sampler.js';

const size = { type: 'string', pattern: '^[0-9]+(\\.[0-9])?G$' } as const;

/** JSON schema of the answer: exactly the interface's fields, nothing more. */
export const statusResponseSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['hostname', 'cpu_percent', 'memory', 'disk', 'uptime_seconds', 'version'],
  properties: {
    hostname: { type: 'string' },
    cpu_percent: { type: 'number' },
    memory: {
      type: 'object',
      additionalProperties: false,
      required: ['total_gb', 'used_percent'],
      properties: { total_gb: { type: 'number' }, used_percent: { type: 'number' } },
    },
    disk: {
      type: 'object',
      additionalProperties: false,
      required: ['models', 'total'],
      properties: {
        models: {
          type: 'object',
          additionalProperties: false,
          required: ['total', 'used', 'free'],
          properties: { total: size, used: size, free: size },
        },
        total: { type: 'string', pattern: '^[0-9]+(\\.[0-9])?[GT]$' },
      },
    },
    uptime_seconds: { type: 'integer' },
    version: { type: 'string', pattern: '^v[0-9]+\\.[0-9]+\\.[0-9]+' },
  },
} as const;

/** Registers `GET /system/status`. */
export function statusRoutes(app: FastifyInstance, sampler: StatusSampler, hooks: Hooks): void {
  app.get('/system/status', { config: { scope: 'system:read' }, schema: { response: { 200: statusResponseSchema } } }, async (_request, reply) => {
    const hostname = hooks.extensions.maybe('network')?.hostname() ?? os.hostname();
    return reply.header('Cache-Control', 'no-store').send(sampler.snapshot(hostname, VERSION));
  });
}
