/**
 * NDJSON streaming (Ollama's stream format): one JSON object per line, flushed as it is written.
 * A client that goes away aborts `signal` (so does the end of the shutdown grace period); a
 * failure after the first line is written as a last `{"error": "..."}` line (the status is
 * already 200 by then).
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { drainSignal } from '../http/drain.js';
import { failStream } from './fail.js';
import { holdFirstTurn } from './first-turn.js';

export interface StreamWriter<T> {
  write(obj: T): boolean;
  end(): void;
  /** Writes the error as a last line and ends the stream. */
  fail(err: unknown): void;
  readonly closed: boolean;
}

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

/**
 * An AbortSignal that fires when the client disconnects before the response is finished, or when
 * the appliance shuts down and the request outlives the grace period (then with a 503 error, which
 * a stream writes as its last frame: see core/http/drain.ts).
 */
export function clientGone(reply: FastifyReply): AbortSignal {
  const ctl = new AbortController();
  const res = reply.raw;
  const drain = drainSignal(reply.server.server);
  const onDrain = (): void => ctl.abort(drain?.reason);
  if (drain?.aborted) onDrain();
  else drain?.addEventListener('abort', onDrain, { once: true });
  res.on('close', () => {
    drain?.removeEventListener('abort', onDrain);
    if (!res.writableFinished) ctl.abort(new Error('client disconnected'));
  });
  return ctl.signal;
}
