/**
 * `GET /system/gpu`: the sampler's cached snapshot, answered without touching the hardware.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import type { GpuSampler } from './sampler.js';

const nullableNumber = { type: ['number', 'null'] } as const;

/** Response schema; it also makes the serializer drop anything undeclared. */
export const gpuResponseSchema = {
  type: 'object',
  required: ['vendor', 'devices', 'source', 'sampled_at', 'stale', 'error'],
  properties: {
    vendor: { type: 'string' },
    devices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'vram_total_mb', 'vram_used_mb', 'temp_c'],
        properties: {
          index: { type: 'integer' },
          name: { type: 'string' },
          vram_total_mb: { type: 'integer' },
          vram_used_mb: { type: 'integer' },
          temp_c: nullableNumber,
          utilization_percent: nullableNumber,
          vendor: { type: 'string' },
          type: { type: 'string' },
        },
      },
    },
    source: { type: ['string', 'null'] },
    sampled_at: { type: ['string', 'null'] },
    stale: { type: 'boolean' },
    error: { type: ['string', 'null'] },
  },
} as const;

/** Registers `GET /system/gpu`. */
export function gpuRoutes(app: FastifyInstance, sampler: GpuSampler): void {
  app.get('/system/gpu', { config: { scope: 'system:read' }, schema: { response: { 200: gpuResponseSchema } } }, async (_request, reply) => {
    return reply.header('Cache-Control', 'no-store').send(sampler.snapshot());
  });
}
