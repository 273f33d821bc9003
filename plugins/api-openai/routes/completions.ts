/**
 * `POST /v1/completions` (legacy text completion). Prompts of an array are generated one after
 * the other, each as its own native generate call, and answered as choices of one response (or
 * interleaved by `index` in one stream). The first call is made before the response starts, so
 * an unknown model is still a 404.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { CompletionBody } from '../translate/schemas.js';
import { clientGone, pump, startSse, type Hooks } from 'lia/plugin';
import type { GenerationEvent, GenerationStream } from 'lia/plugin/contracts';
import { openaiErrorBody } from '../errors.js';
import {
  CompletionCollector,
  legacyLogprobs,
  sumUsage,
  textCompletion,
  translateCompletionRequest,
  type CompletionLogprobs,
  type TextCompletion,
} from '../translate/completion.js';
import type { Usage } from '../translate/chat-response.js';
import { newId, unixSeconds, type ResponseMeta } from '../translate/shared.js';
import { requestIdHeader, resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** Registers the route. */
export function completionsRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: CompletionBody }>('/v1/completions', { schema: { body: CompletionBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const tr = translateCompletionRequest(request.body);
    const requested = tr.natives[0]!.model;
    for (const n of tr.natives) {
      n.model = resolveAlias(requested, options);
      if (!tr.stream) n.stream = false;
    }
    const inference = hooks.inference.get();
    const signal = clientGone(reply);
    // Each prompt's generation settles with its first event in hand (GenerationStream), so a
    // failure before any output keeps its status.
    const start = (i: number): Promise<GenerationStream> => inference.generate(tr.natives[i]!, signal).catch((err) => withModelParam(err, requested));
    let generation = await start(0);
    const meta: ResponseMeta = { id: newId('cmpl-'), created: unixSeconds(), model: generation.model };
    requestIdHeader(reply, meta.id);
    const withLogprobs = tr.natives[0]!.logprobs !== undefined;

    if (!tr.stream) {
      const collected: CompletionCollector[] = [];
      for (let i = 0; i < tr.natives.length; i++) {
        if (i > 0) generation = await start(i);
        const c = new CompletionCollector(tr.echo ? tr.prompts[i] : '', withLogprobs);
        for await (const event of generation.events) c.add(event);
        collected.push(c);
      }
      const choices = collected.map((c, index) => ({
        text: c.text,
        index,
        logprobs: c.logprobs ? legacyLogprobs(c.logprobs, 0) : null,
        finish_reason: c.reason,
      }));
      return reply.type('application/json; charset=utf-8').send(textCompletion(meta, choices, sumUsage(collected.map((c) => c.usage))));
    }

    const sse = startSse<TextCompletion>(reply, { errorFrame: openaiErrorBody });
    const chunk = (index: number, text: string, finish: 'stop' | 'length' | null = null, logprobs: CompletionLogprobs | null = null): TextCompletion =>
      textCompletion(meta, [{ text, index, logprobs, finish_reason: finish }]);
    // One prompt's generation after the other, each with its echo and its closing chunk.
    const usages: Usage[] = [];
    for (let i = 0; i < tr.natives.length; i++) {
      if (i > 0) {
        try {
          generation = await start(i);
        } catch (err) {
          return sse.fail(err);
        }
      }
      const c = new CompletionCollector();
      const frames = {
        start: () => (tr.echo && tr.prompts[i] ? [chunk(i, tr.prompts[i]!)] : []),
        next: (event: GenerationEvent) => {
          const text = event.type === 'token' && event.text.length > 0 ? event.text : undefined;
          const out =
            text === undefined
              ? []
              : [chunk(i, text, null, withLogprobs && event.type === 'token' ? legacyLogprobs(event.logprobs ?? [], c.text.length) : null)];
          c.add(event);
          return out;
        },
        finish: () => [chunk(i, '', c.reason)],
      };
      if (!(await pump(sse, generation.events, frames, 'open'))) return;
      usages.push(c.usage);
    }
    if (tr.includeUsage) sse.write(textCompletion(meta, [], sumUsage(usages)));
    sse.done();
  });
}
