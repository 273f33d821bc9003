/**
 * Server-Sent Events (OpenAI's stream format): `data: <json>\n\n` frames, ended by
 * `data: [DONE]`. A failure after the first frame is sent as a last `data: {"error":{...}}` frame.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { errorBody, toAppError } from '../http/error-handler.js';
import type { StreamWriter } from './ndjson.js';

export function startSse<T>(reply: FastifyReply): StreamWriter<T> & { done(): void } {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-store',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  // The head leaves with the first frames: those written in this turn (the caller has its first
  // event already) go out as one TLS write instead of one per frame.
  res.cork();
  setImmediate(() => res.uncork());
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
      send(JSON.stringify(errorBody('/v1/', e)));
      if (!res.writableEnded) res.end();
    },
    get closed() {
      return closed;
    },
  };
}
