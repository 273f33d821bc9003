/**
 * `POST /api/chat`: a conversation with the model's chat template, Ollama's shapes. Tool calls come
 * back in `message.tool_calls` and are never executed. An empty `messages` only loads the model
 * (`done_reason: "load"`), or unloads it with `keep_alive: 0` (`done_reason: "unload"`).
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { clientGone } from 'lia/plugin';
import type { ToolCall } from '../public.js';
import type { InferenceService } from '../public.js';
import { parseKeepAlive } from '../keep-alive.js';
import { parseSamplingOptions } from '../request-options.js';
import { chatMessages, given, logprobsField, outputFormat, toolDefinitions } from './body.js';
import { ChatBody } from './schemas.js';
import { createdAt, respond } from './respond.js';

const message = (content: string, calls?: ToolCall[], thinking?: string) => ({
  message: { role: 'assistant', content, ...(thinking ? { thinking } : {}), ...(calls && calls.length > 0 ? { tool_calls: calls } : {}) },
});

export function chatRoute(app: FastifyInstance, service: () => InferenceService): void {
  app.post<{ Body: ChatBody }>('/api/chat', { schema: { body: ChatBody }, config: { scope: 'inference' } }, async (request, reply) => {
    const started = process.hrtime.bigint();
    const body = request.body;
    const model = body.model;
    const msgs = chatMessages(body.messages);
    const keep = given(body.keep_alive);
    const options = parseSamplingOptions(body.options);
    const stream = body.stream ?? true;
    const toolList = toolDefinitions(body.tools);
    const fmt = outputFormat(body.format);
    const think = given(body.think);

    if (msgs.length === 0) {
      const unload = parseKeepAlive(keep) === 0;
      if (unload) await service().unload(model);
      else await service().load(model, keep);
      return { model, created_at: createdAt(), ...message(''), done_reason: unload ? 'unload' : 'load', done: true };
    }

    const signal = clientGone(reply);
    const gen = await service().chat(
      {
        model,
        messages: msgs,
        options,
        ...(toolList ? { tools: toolList } : {}),
        ...(fmt !== undefined ? { format: fmt } : {}),
        ...(keep !== undefined ? { keep_alive: keep } : {}),
        ...(think !== undefined ? { think } : {}),
        ...logprobsField(body),
        ...(stream ? {} : { stream: false }),
      },
      signal,
    );
    return respond(reply, gen, {
      stream,
      started,
      model,
      shape: { chunk: message, final: (text, calls, _done, thinking) => message(text, calls, thinking) },
    });
  });
}
