/**
 * `POST /tokenize` and `POST /detokenize`, in llama-server's shape, at the root as llama-server
 * serves them: the model's own tokenizer on a text (`add_special`, `parse_special`,
 * `with_pieces`), and token ids back to text. Any local text model (GGUF or ONNX); the model is
 * loaded if needed, and the key's model allow-list applies as for inference.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone, Errors } from 'lia/plugin';
import type { InferenceService } from '../public.js';
import { given } from './body.js';
import { DetokenizeBody, TokenizeBody } from './schemas.js';

export function tokenRoutes(app: FastifyInstance, service: () => InferenceService): void {
  app.post<{ Body: TokenizeBody }>('/tokenize', { schema: { body: TokenizeBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const body = request.body;
    const engine = service();
    if (!engine.tokenize) throw Errors.unavailable('the inference service does not tokenize');
    const flags = { add_special: given(body.add_special), parse_special: given(body.parse_special), with_pieces: given(body.with_pieces) };
    const keep = given(body.keep_alive);
    const res = await engine.tokenize(
      {
        model: body.model,
        content: body.content,
        ...Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
      },
      clientGone(reply),
    );
    const pieces = res.pieces;
    return { tokens: pieces ? res.tokens.map((id, i) => ({ id, piece: pieces[i] ?? '' })) : res.tokens };
  });

  app.post<{ Body: DetokenizeBody }>('/detokenize', { schema: { body: DetokenizeBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const body = request.body;
    const engine = service();
    if (!engine.detokenize) throw Errors.unavailable('the inference service does not detokenize');
    const keep = given(body.keep_alive);
    const res = await engine.detokenize({ model: body.model, tokens: body.tokens, ...(keep !== undefined ? { keep_alive: keep } : {}) }, clientGone(reply));
    return { content: res.content };
  });
}
