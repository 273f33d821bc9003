/**
 * `POST /api/embed` (L2-normalised `embeddings`, batch input, `truncate`, `dimensions`) and the
 * legacy `POST /api/embeddings` (one raw `embedding`). An empty input only loads the model.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone, Errors } from '../../../core/index.js';
import type { InferenceService } from '../../../core/contracts/inference.js';
import { parseSamplingOptions } from '../request-options.js';
import { keepAlive, objectBody, optionalBool, optionalInt, optionalString, requiredModel } from './body.js';

function inputs(value: unknown): string[] {
  if (value === undefined || value === null || value === '') return [];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((v) => typeof v === 'string')) return value as string[];
  throw Errors.badRequest('invalid input type', { param: 'input' });
}

export function embedRoutes(app: FastifyInstance, service: () => InferenceService): void {
  app.post('/api/embed', { config: { scope: 'inference' } }, async (request, reply) => {
    const body = objectBody(request.body);
    const model = requiredModel(body);
    const input = inputs(body['input']);
    const truncate = optionalBool(body, 'truncate');
    const dimensions = optionalInt(body, 'dimensions', 1);
    const keep = keepAlive(body);
    const res = await service().embed(
      {
        model,
        input,
        options: parseSamplingOptions(body['options']),
        ...(truncate !== undefined ? { truncate } : {}),
        ...(dimensions !== undefined ? { dimensions } : {}),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
      },
      clientGone(reply),
    );
    return {
      model,
      embeddings: res.embeddings,
      ...(res.totalNs > 0 ? { total_duration: res.totalNs } : {}),
      ...(res.loadNs > 0 ? { load_duration: res.loadNs } : {}),
      ...(res.promptTokens > 0 ? { prompt_eval_count: res.promptTokens } : {}),
    };
  });

  app.post('/api/embeddings', { config: { scope: 'inference' } }, async (request, reply) => {
    const body = objectBody(request.body);
    const model = requiredModel(body);
    const prompt = optionalString(body, 'prompt') ?? '';
    const keep = keepAlive(body);
    const res = await service().embed(
      {
        model,
        input: prompt === '' ? [] : [prompt],
        normalize: false,
        options: parseSamplingOptions(body['options']),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
      },
      clientGone(reply),
    );
    return { embedding: res.embeddings[0] ?? [] };
  });
}
