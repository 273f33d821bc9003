/**
 * Sends a stream's head together with its first frames. A streaming route has its first event in
 * hand before it writes anything (the inference service awaits it), so the head and the frames written for that event
 * (the OpenAI role chunk and the first token, say) are all ready in the same run of the microtask
 * queue. Corking until that run ends makes them one TLS record and one socket write; a
 * `setImmediate` instead waited for the next event-loop turn, which showed in the time to first
 * token (bench/results/2026-11-engine.md).
 *
 * @module
 */
import type { ServerResponse } from 'node:http';

/**
 * Corks `res` until the current microtask queue has drained. Call it from async code that has
 * awaited something (the routes have awaited the engine's stream): a `process.nextTick` queued from
 * a microtask runs once the queue is empty, whereas one queued from a plain callback would run
 * before any microtask.
 */
export function holdFirstTurn(res: ServerResponse): void {
  res.cork();
  process.nextTick(() => res.uncork());
}
