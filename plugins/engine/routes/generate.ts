/**
 * `POST /api/generate`: text generation with Ollama's request and response shapes. An empty prompt
 * only loads the model (`done_reason: "load"`), or unloads it with `keep_alive: 0`
 * (`done_reason: "unload"`).
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone } from 'lia/plugin';
import type { InferenceService } from '../public.js';
import { parseSamplingOptions } from '../request-options.js';
import { parseKeepAlive } from '../keep-alive.js';
import { given, logprobsField, media, outputFormat } from './body.js';
import { GenerateBody } from './schemas.js';
import { createdAt, respond } from './respond.js';

export function generateRoute(app: FastifyInstance, service: () => InferenceService): void {
  app.post<{ Body: GenerateBody }>('/api/generate', { schema: { body: GenerateBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const started = process.hrtime.bigint();
    const body = request.body;
    const model = body.model;
    const prompt = body.prompt ?? '';
    const suffix = given(body.suffix);
    const keep = given(body.keep_alive);
    const options = parseSamplingOptions(body.options);
    const stream = body.stream ?? true;

    if (prompt === '' && !suffix) {
      const unload = parseKeepAlive(keep) === 0;
      if (unload) await service().unload(model);
      else await service().load(model, keep);
      return { model, created_at: createdAt(), response: '', done: true, done_reason: unload ? 'unload' : 'load' };
    }

    const signal = clientGone(reply);
    const system = given(body.system);
    const template = given(body.template);
    const raw = given(body.raw);
    const fmt = outputFormat(body.format);
    const context = given(body.context);
    const think = given(body.think);
    const gen = await service().generate(
      {
        model,
        prompt,
        options,
        ...(suffix ? { suffix } : {}),
        ...media(body.images, body.audio),
        ...(system !== undefined ? { system } : {}),
        ...(template !== undefined ? { template } : {}),
        ...(raw !== undefined ? { raw } : {}),
        ...(fmt !== undefined ? { format: fmt } : {}),
        ...(context?.length ? { context } : {}),
        ...(think !== undefined ? { think } : {}),
        ...logprobsField(body),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
        ...(stream ? {} : { stream: false }),
      },
      signal,
    );
    return respond(reply, gen, {
      stream,
      started,
      model,
      shape: {
        chunk: (text, _calls, thinking) => ({ response: text, ...(thinking ? { thinking } : {}) }),
        final: (text, _calls, done, thinking) => ({ response: text, ...(thinking ? { thinking } : {}), ...(done.context ? { context: done.context } : {}) }),
      },
    });
  });
}
