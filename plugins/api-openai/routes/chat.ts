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
import { pump, startSse, type Hooks } from 'lia/plugin';
import type { GenerationEvent } from 'lia/engine';
import { openaiErrorBody } from '../errors.js';
import { ChatChunker, ChatCollector, type ChatCompletionChunk } from '../translate/chat-response.js';
import { translateChatRequest } from '../translate/chat-request.js';
import { startChat, type RouteOptions } from './common.js';

/** Registers the route. */
export function chatRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: ChatCompletionBody }>(
    '/v1/chat/completions',
    { schema: { body: ChatCompletionBody }, config: { scope: 'inference' } },
    async (request, reply) => {
      const { native, stream, includeUsage, ignored } = translateChatRequest(request.body);
      if (ignored.length > 0) request.log.debug({ ignored }, 'accepted without effect');
      const { meta, events } = await startChat(hooks, stream ? native : { ...native, stream: false }, options, reply, 'chatcmpl-');

      if (!stream) {
        const collector = new ChatCollector(meta, undefined, native.logprobs !== undefined);
        for await (const event of events) collector.add(event);
        return reply.type('application/json; charset=utf-8').send(collector.result());
      }

      const sse = startSse<ChatCompletionChunk>(reply, { errorFrame: openaiErrorBody });
      const chunker = new ChatChunker(meta, undefined, native.logprobs !== undefined);
      const frames = {
        start: () => [chunker.first()],
        next: (event: GenerationEvent) => {
          const chunk = chunker.next(event);
          return chunk ? [chunk] : [];
        },
        finish: () => (includeUsage ? [chunker.last(), chunker.usage()] : [chunker.last()]),
      };
      await pump(sse, events, frames, 'done');
    },
  );
}
