/**
 * `POST /v1/responses` (OpenAI's Responses API, stateless): translate, call the native chat,
 * translate back, as the chat completions route does. Everything that can fail with a status
 * fails before the first byte; after that, a failure is a last `event: error` frame. The stream
 * names every frame (`event: response.output_text.delta`) and ends after `response.completed`
 * (or `response.incomplete`) without `[DONE]`, as OpenAI's does.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { pump, startSse, type Hooks } from 'lia/plugin';
import { ResponseEmitter, type ResponseStreamEvent } from '../translate/responses-events.js';
import { translateResponseRequest } from '../translate/responses-request.js';
import { ResponseBody } from '../translate/responses-schema.js';
import { startChat, type RouteOptions } from './common.js';

/** The SSE `event:` name of a frame: its `type`. */
const eventName = (body: unknown): string | undefined => (body as { type?: string }).type;

/** Registers the route. */
export function responsesRoute(app: FastifyInstance, hooks: Hooks, options: RouteOptions): void {
  app.post<{ Body: ResponseBody }>('/v1/responses', { schema: { body: ResponseBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const { native, stream, echo, names, ignored } = translateResponseRequest(request.body);
    if (ignored.length > 0) request.log.debug({ ignored }, 'accepted without effect');
    const { meta, events } = await startChat(hooks, stream ? native : { ...native, stream: false }, options, reply, 'resp_');
    const emitter = new ResponseEmitter(meta, echo, undefined, names);

    if (!stream) {
      for await (const event of events) emitter.next(event);
      emitter.finish();
      return reply.type('application/json; charset=utf-8').send(emitter.response());
    }

    const sse = startSse<ResponseStreamEvent>(reply, { errorFrame: (e) => emitter.error(e), eventName });
    await pump(sse, events, { start: () => emitter.start(), next: (event) => emitter.next(event), finish: () => emitter.finish() });
  });
}
