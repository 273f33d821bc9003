/**
 * `POST /v1/rerank`, `/rerank` (llama-server, vLLM, Jina) and `/v2/rerank` (Cohere v2, vLLM):
 * scores documents against a query on a reranker model through the engine, which checks the
 * key's model allow-list and answers 400 for a model without the `rerank` capability.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone, Errors, type Hooks } from 'lia/plugin';
import { RerankBody, rerankAnswer, toRerankRequest } from '../rerank.js';
import { resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** The paths, with whether each returns documents unless told (Cohere v2 never lists them). */
export const RERANK_PATHS = [
  { path: '/v1/rerank', documents: true },
  { path: '/rerank', documents: true },
  { path: '/v2/rerank', documents: false },
] as const;

/** Registers the routes. */
export function rerankRoutes(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  for (const { path, documents } of RERANK_PATHS) {
    app.post<{ Body: RerankBody }>(path, { schema: { body: RerankBody }, config: { scope: 'inference' } }, async (request, reply) => {
      const body = request.body;
      const engine = hooks.extensions.get('inference');
      if (!engine.rerank) throw Errors.unavailable('the inference service does not rerank');
      const result = await engine
        .rerank(toRerankRequest(body, resolveAlias(body.model, options)), clientGone(reply))
        .catch((err) => withModelParam(err, body.model));
      return reply.type('application/json; charset=utf-8').send(rerankAnswer(body, result, body.return_documents ?? documents));
    });
  }
}
