/**
 * `POST /v1/chat/completions`: translate, call the native chat, translate back. Everything that
 * can fail with a status (bad body, unknown model, full queue, a failure before the first event)
 * fails before the first byte; after that, a failure is a last `data: {"error":…}` frame. A client that disconnects aborts the
 * generation through the signal given to the engine.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { ChatCompletionBody } from '../translate/schemas.js';
import { clientGone, primed, startSse, type Hooks } from 'lia/plugin';
import { openaiErrorBody } from '../errors.js';
import { ChatChunker, ChatCollector, type ChatCompletionChunk } from '../translate/chat-response.js';
import { translateChatRequest } from '../translate/chat-request.js';
import { newId, unixSeconds, type ResponseMeta } from '../translate/ids.js';
import { requestIdHeader, resolveAlias, withModelParam, type RouteOptions } from './common.js';

/** Registers the route. */
export function chatRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: ChatCompletionBody }>('/v1/chat/completions', { schema: { body: ChatCompletionBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const { native, stream, includeUsage } = translateChatRequest(request.body);
    const requested = native.model;
    native.model = resolveAlias(requested, options);
    const inference = hooks.inference.get();
    const signal = clientGone(reply);
    const generation = await inference.chat(native, signal).catch((err) => withModelParam(err, requested));
    // Priming sends the request to the engine at once; what does not depend on the first event is
    // set up while the engine works on it, off the time to first token (0.1 ms here, traced).
    const first = primed(generation.events);
    const meta: ResponseMeta = { id: newId('chatcmpl-'), created: unixSeconds(), model: generation.model };
    requestIdHeader(reply, meta.id);
    const events = await first;

    if (!stream) {
      const collector = new ChatCollector(meta);
      for await (const event of events) collector.add(event);
      return reply.type('application/json; charset=utf-8').send(collector.result());
    }

    const sse = startSse<ChatCompletionChunk>(reply, { errorFrame: openaiErrorBody });
    const chunker = new ChatChunker(meta);
    try {
      sse.write(chunker.first());
      for await (const event of events) {
        if (sse.closed) return sse.end();
        const chunk = chunker.next(event);
        if (chunk) sse.write(chunk);
      }
      sse.write(chunker.last());
      if (includeUsage) sse.write(chunker.usage());
      sse.done();
    } catch (err) {
      if (signal.aborted) sse.end();
      else sse.fail(err);
    }
  });
}
