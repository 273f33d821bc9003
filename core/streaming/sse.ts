/**
 * Server-Sent Events: `data: <json>\n\n` frames, ended by `data: [DONE]` (OpenAI's chat stream
 * format). With `eventName`, each frame is also named by an `event: <name>` line (the formats of
 * OpenAI's Responses API and Anthropic's Messages API, which end without `[DONE]`: the route calls
 * `end()`). A failure after the first frame is sent as a last data frame whose body the surface
 * gives (`errorFrame`, defaults to `{"error":"message"}`), named by `eventName` too.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import type { AppError } from '../errors.js';
import { defaultErrorBody } from '../http/error-handler.js';
import { failStream } from './fail.js';
import { holdFirstTurn, type StreamWriter } from './pump.js';

export interface SseOptions {
  /** The body of the last frame of a failed stream, in the surface's error format. */
  errorFrame?: (error: AppError) => unknown;
  /**
   * The `event:` name of a frame, from its body (error frames included); `undefined` writes the
   * frame without one. Defaults to none: `data:` lines only.
   */
  eventName?: (body: unknown) => string | undefined;
}

export function startSse<T>(reply: FastifyReply, options: SseOptions = {}): StreamWriter<T> & { done(): void } {
  const errorFrame = options.errorFrame ?? defaultErrorBody;
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  holdFirstTurn(res);
  let closed = false;
  res.on('close', () => (closed = true));
  /** One frame: `data: …`, after an `event: …` line when the frame has a name. */
  const send = (data: string, name?: string): boolean => {
    if (closed || res.writableEnded) return false;
    return res.write(name === undefined ? `data: ${data}\n\n` : `event: ${name}\ndata: ${data}\n\n`);
  };
  const frame = (body: unknown): boolean => send(JSON.stringify(body), options.eventName?.(body));
  return {
    write: (obj) => frame(obj),
    done() {
      send('[DONE]');
      if (!res.writableEnded) res.end();
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    fail(err) {
      failStream(reply, err, (e) => frame(errorFrame(e)));
    },
    get closed() {
      return closed;
    },
  };
}
