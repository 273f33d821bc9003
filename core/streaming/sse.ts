/**
 * Server-Sent Events: `data: <json>\n\n` frames, ended by `data: [DONE]` (OpenAI's stream format).
 * A failure after the first frame is sent as a last data frame whose body the surface gives
 * (`errorFrame`, defaults to `{"error":"message"}`). With `named`, every frame also carries an
 * `event:` line (Anthropic's stream format), and `doneMarker: false` leaves out the `[DONE]` frame.
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
  /**
   * Precede every frame with `event: <name>`, the name being the frame object's own `type` field
   * (the error frame's too), as Anthropic's Messages stream does. Defaults to false (data only).
   */
  named?: boolean;
  /** End a finished stream with `data: [DONE]` (OpenAI's marker). Defaults to true. */
  doneMarker?: boolean;
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
  const sendObject = (obj: unknown): boolean => {
    if (!options.named) return send(JSON.stringify(obj));
    const type = (obj as { type?: unknown } | null)?.type;
    const name = typeof type === 'string' ? type : 'message';
    return closed || res.writableEnded ? false : res.write(`event: ${name}\ndata: ${JSON.stringify(obj)}\n\n`);
  };
  return {
    write: (obj) => sendObject(obj),
    done() {
      if (options.doneMarker ?? true) send('[DONE]');
      if (!res.writableEnded) res.end();
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    fail(err) {
      const e = toAppError(err);
      if (e.statusCode >= 500) reply.log.error({ err }, 'stream failed');
      sendObject(errorFrame(e));
      if (!res.writableEnded) res.end();
    },
    get closed() {
      return closed;
    },
  };
}
