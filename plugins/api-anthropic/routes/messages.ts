/**
 * `POST /v1/messages` and `POST /v1/messages/count_tokens`: translate, call the native chat,
 * translate back. Everything that can fail with a status (bad body, unknown model, full queue, a
 * failure before the first event) fails before the first byte, in Anthropic's error shape; after
 * that, a failure is a last `event: error` frame. A client that disconnects aborts the
 * generation through the signal given to the engine.
 *
 * @module
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { clientGone, pump, startSse, type Hooks } from 'lia/plugin';
import { CREDENTIAL_HEADERS } from '../auth.js';
import { anthropicErrorBody } from '../errors.js';
import { translateCountRequest, translateMessagesRequest } from '../translate/request.js';
import { MessageCollector, newId, StreamTranslator, type StreamEvent } from '../translate/response.js';
import { CountTokensBody, MessagesBody } from '../translate/schemas.js';

/** Sets `request-id` (the message id), which Anthropic's SDKs report as `_request_id`. */
function requestIdHeader(reply: FastifyReply, id: string): void {
  reply.raw.setHeader('request-id', id);
}

/** Registers both routes. */
export function messagesRoutes(app: FastifyInstance, hooks: Hooks): void {
  app.post<{ Body: MessagesBody }>(
    '/v1/messages',
    { schema: { body: MessagesBody }, config: { scope: 'inference', credentialHeaders: CREDENTIAL_HEADERS } },
    async (request, reply) => {
      const { native, stream, ignored } = translateMessagesRequest(request.body);
      if (ignored.length > 0) request.log.debug({ ignored }, 'accepted without effect');
      const signal = clientGone(reply);
      const generation = await hooks.extensions.get('inference').chat(stream ? native : { ...native, stream: false }, signal);
      const meta = { id: newId('msg_'), model: generation.model };
      requestIdHeader(reply, meta.id);
      const { events } = generation;

      if (!stream) {
        const collector = new MessageCollector(meta);
        for await (const event of events) collector.add(event);
        return reply.type('application/json; charset=utf-8').send(collector.result());
      }

      // Anthropic names every frame after its `type` and ends without OpenAI's `[DONE]`.
      const sse = startSse<StreamEvent>(reply, { errorFrame: anthropicErrorBody, eventName: (body) => (body as { type: string }).type });
      const translator = new StreamTranslator(meta);
      await pump(sse, events, { start: () => translator.start(), next: (event) => translator.next(event), finish: () => translator.finish() });
    },
  );

  app.post<{ Body: CountTokensBody }>(
    '/v1/messages/count_tokens',
    { schema: { body: CountTokensBody }, config: { scope: 'inference', credentialHeaders: CREDENTIAL_HEADERS } },
    async (request, reply) => {
      const inference = hooks.extensions.get('inference');
      const { native, ignored } = translateCountRequest(request.body);
      if (ignored.length > 0) request.log.debug({ ignored }, 'accepted without effect');
      if (inference.countChatTokens) return { input_tokens: (await inference.countChatTokens(native, clientGone(reply))).promptTokens };
      // An inference service without a count: a one-token chat reports the prompt's length.
      const generation = await inference.chat({ ...native, options: { num_predict: 1, temperature: 0 } }, clientGone(reply));
      let inputTokens = 0;
      for await (const event of generation.events) if (event.type === 'done') inputTokens = event.promptTokens;
      return { input_tokens: inputTokens };
    },
  );
}
