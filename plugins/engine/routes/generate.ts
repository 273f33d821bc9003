/**
 * `POST /api/generate`: text generation with Ollama's request and response shapes. An empty prompt
 * only loads the model (`done_reason: "load"`), or unloads it with `keep_alive: 0`
 * (`done_reason: "unload"`).
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone } from '../../../core/index.js';
import type { InferenceService } from '../../../core/contracts/inference.js';
import { parseSamplingOptions } from '../request-options.js';
import { parseKeepAlive } from '../keep-alive.js';
import { format, keepAlive, refuseUnsupported, objectBody, optionalBool, optionalString, requiredModel } from './body.js';
import { createdAt, respond } from './respond.js';

export function generateRoute(app: FastifyInstance, service: () => InferenceService): void {
  app.post('/api/generate', { config: { scope: 'inference' } }, async (request, reply) => {
    const started = process.hrtime.bigint();
    const body = objectBody(request.body);
    const model = requiredModel(body);
    refuseUnsupported(body, model);
    const prompt = optionalString(body, 'prompt') ?? '';
    const suffix = optionalString(body, 'suffix');
    const keep = keepAlive(body);
    const options = parseSamplingOptions(body['options']);
    const stream = optionalBool(body, 'stream') ?? true;

    if (prompt === '' && !suffix) {
      const unload = parseKeepAlive(keep) === 0;
      if (unload) await service().unload(model);
      else await service().load(model, keep);
      return { model, created_at: createdAt(), response: '', done: true, done_reason: unload ? 'unload' : 'load' };
    }

    const signal = clientGone(reply);
    const system = optionalString(body, 'system');
    const template = optionalString(body, 'template');
    const raw = optionalBool(body, 'raw');
    const fmt = format(body);
    const gen = await service().generate(
      {
        model,
        prompt,
        options,
        ...(suffix ? { suffix } : {}),
        ...(system !== undefined ? { system } : {}),
        ...(template !== undefined ? { template } : {}),
        ...(raw !== undefined ? { raw } : {}),
        ...(fmt !== undefined ? { format: fmt } : {}),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
      },
      signal,
    );
    return respond(reply, gen, {
      stream,
      started,
      model,
      shape: { chunk: (text) => ({ response: text }), final: (text) => ({ response: text }) },
    });
  });
}
