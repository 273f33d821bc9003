/**
 * Server-Sent Events: `data: <json>\n\n` frames, ended by `data: [DONE]` (OpenAI's stream format).
 * A failure after the first frame is sent as a last data frame whose body the surface gives
 * (`errorFrame`, defaults to `{"error":"message"}`).
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import type { AppError } from '../errors.js';
import { defaultErrorBody, toAppError } from '../http/error-handler.js';
import { holdFirstTurn } from './first-turn.js';
import type { StreamWriter } from './ndjson.js';

export interface SseOptions {
  /** The body of the last frame of a failed stream, in the surface's error format. */
  errorFrame?: (error: AppError) => unknown;
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
  const send = (data: string): boolean => (closed || res.writableEnded ? false : res.write(`data: ${data}\n\n`));
  return {
    write: (obj) => send(JSON.stringify(obj)),
    done() {
      send('[DONE]');
      if (!res.writableEnded) res.end();
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    fail(err) {
      const e = toAppError(err);
      if (e.statusCode >= 500) reply.log.error({ err }, 'stream failed');
      send(JSON.stringify(errorFrame(e)));
      if (!res.writableEnded) res.end();
    },
    get closed() {
      return closed;
    },
  };
}
