/**
 * `POST /v1/embeddings`: translate, call the native embed, answer floats or base64.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { EmbeddingsBody } from '../translate/schemas.js';
import { clientGone, type Hooks } from 'lia/plugin';
import { embeddingList, translateEmbeddingsRequest } from '../translate/embeddings.js';
import { resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** Registers the route. */
export function embeddingsRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: EmbeddingsBody }>('/v1/embeddings', { schema: { body: EmbeddingsBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const { native, encoding } = translateEmbeddingsRequest(request.body);
    const requested = native.model;
    native.model = resolveAlias(requested, options);
    const result = await hooks.extensions
      .get('inference')
      .embed(native, clientGone(reply))
      .catch((err) => withModelParam(err, requested));
    return reply.type('application/json; charset=utf-8').send(embeddingList(result, encoding));
  });
}
