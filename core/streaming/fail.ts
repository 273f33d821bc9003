/**
 * How every stream ends on a failure after its first frame (the status is already 200): a client
 * that left is only logged; otherwise a server fault is logged as an error, and the surface's last
 * frame carries the error before the stream ends. NDJSON and SSE share it.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import type { AppError } from '../errors.js';
import { clientLeft } from '../http/client-left.js';
import { toAppError } from '../http/error-handler.js';

/** Fails the stream of `reply` with `err`; `lastFrame` writes the surface's error frame. */
export function failStream(reply: FastifyReply, err: unknown, lastFrame: (error: AppError) => void): void {
  const e = toAppError(err);
  const res = reply.raw;
  if (clientLeft(res)) {
    reply.log.info({ reason: e.message }, 'client went away mid-stream');
    return;
  }
  if (e.statusCode >= 500) reply.log.error({ err }, 'stream failed');
  if (res.writableEnded || res.destroyed) return;
  lastFrame(e);
  if (!res.writableEnded) res.end();
}
