/**
 * NDJSON streaming (Ollama's stream format): one JSON object per line, flushed as it is written.
 * A failure after the first line is written as a last `{"error": "..."}` line (the status is
 * already 200 by then). What every stream shares (the writer, `clientGone`, the pump) is in
 * ./pump.ts.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { failStream } from './fail.js';
import { holdFirstTurn, type StreamWriter } from './pump.js';

/**
 * Takes over the reply and returns a writer. The caller must have checked everything that can
 * fail with a status before calling this: from here on the status is 200.
 */
export function startNdjson<T>(reply: FastifyReply, contentType = 'application/x-ndjson'): StreamWriter<T> {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
  holdFirstTurn(res);
  let closed = false;
  res.on('close', () => (closed = true));
  return {
    write(obj) {
      if (closed || res.writableEnded) return false;
      return res.write(JSON.stringify(obj) + '\n');
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    fail(err) {
      failStream(reply, err, (e) => {
        if (!closed) res.write(JSON.stringify({ error: e.message }) + '\n');
      });
    },
    get closed() {
      return closed;
    },
  };
}
