/**
 * `POST /api/embed` (L2-normalised `embeddings`, batch input, `truncate`, `dimensions`) and the
 * legacy `POST /api/embeddings` (one raw `embedding`). An empty input only loads the model.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone } from 'lia/plugin';
import type { InferenceService } from '../public.js';
import { parseSamplingOptions } from '../request-options.js';
import { given } from './body.js';
import { EmbedBody, EmbeddingsBody } from './schemas.js';

/** `input` as a list; an empty string or none only loads the model. */
function inputs(value: string | string[] | null | undefined): string[] {
  if (value === undefined || value === null || value === '') return [];
  return typeof value === 'string' ? [value] : value;
}

export function embedRoutes(app: FastifyInstance, service: () => InferenceService): void {
  app.post<{ Body: EmbedBody }>('/api/embed', { schema: { body: EmbedBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const body = request.body;
    const model = body.model;
    const input = inputs(body.input);
    const truncate = given(body.truncate);
    const dimensions = given(body.dimensions);
    const keep = given(body.keep_alive);
    const res = await service().embed(
      {
        model,
        input,
        options: parseSamplingOptions(body.options),
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

  app.post<{ Body: EmbeddingsBody }>('/api/embeddings', { schema: { body: EmbeddingsBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const body = request.body;
    const model = body.model;
    const prompt = body.prompt ?? '';
    const keep = given(body.keep_alive);
    const res = await service().embed(
      {
        model,
        input: prompt === '' ? [] : [prompt],
        normalize: false,
        options: parseSamplingOptions(body.options),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
      },
      clientGone(reply),
    );
    return { embedding: res.embeddings[0] ?? [] };
  });
}
