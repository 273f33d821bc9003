/**
 * Server-Sent Events (OpenAI's stream format): `data: <json>\n\n` frames, ended by
 * `data: [DONE]`. A failure after the first frame is sent as a last `data: {"error":{...}}` frame.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { errorBody, toAppError } from '../http/error-handler.js';
import { holdFirstTurn } from './first-turn.js';
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
      send(JSON.stringify(errorBody('/v1/', e)));
      if (!res.writableEnded) res.end();
    },
    get closed() {
      return closed;
    },
  };
}
