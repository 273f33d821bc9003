/**
 * What every stream shares, whatever its format (NDJSON in ./ndjson.ts, SSE in ./sse.ts): the
 * writer a format hands out, the corking of its head with its first frames, the signal that a
 * client left, and the pump every streaming route runs: a generation's events turned into frames
 * by the surface's translator and written in order, the stream ended or failed in one way. A
 * client that leaves ends the loop (the generation is cancelled through its signal); a failure
 * after the first frame is the writer's `fail` (the surface's error frame, or only a log line for
 * a client that left).
 *
 * @module
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import { drainSignal } from '../http/drain.js';

/** A stream taken over from a reply, in one format. */
export interface StreamWriter<T> {
  write(obj: T): boolean;
  end(): void;
  /** Writes the error as a last frame and ends the stream. */
  fail(err: unknown): void;
  readonly closed: boolean;
}

/**
 * Sends a stream's head together with its first frames: corks `res` until the current microtask
 * queue has drained. A streaming route has its first event in hand before it writes anything (the
 * inference service awaits it), so the head and the frames written for that event (the OpenAI
 * role chunk and the first token, say) are all ready in the same run of the microtask queue;
 * corking until that run ends makes them one TLS record and one socket write. A `setImmediate`
 * instead waited for the next event-loop turn, which showed in the time to first token
 * (bench/results/2026-11-engine.md). Call it from async code that has awaited something (the
 * routes have awaited the engine's stream): a `process.nextTick` queued from a microtask runs once
 * the queue is empty, whereas one queued from a plain callback would run before any microtask.
 */
export function holdFirstTurn(res: ServerResponse): void {
  res.cork();
  process.nextTick(() => res.uncork());
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

/** A surface's translation of one stream: its opening frames, the frames of each event, its closing frames. */
export interface StreamFrames<E, F> {
  start?(): readonly F[];
  next(event: E): readonly F[];
  finish?(): readonly F[];
}

/**
 * Writes `events` through `frames` onto `writer`. `end`: `'end'` (the default) ends the stream,
 * `'done'` ends it with SSE's `[DONE]`, `'open'` leaves it open for more (a route that streams
 * several generations in turn). Resolves true when every event was written, false when the client
 * left or the stream failed (then it is over).
 */
export async function pump<E, F>(
  writer: StreamWriter<F> & { done?(): void },
  events: AsyncIterable<E>,
  frames: StreamFrames<E, F>,
  end: 'end' | 'done' | 'open' = 'end',
): Promise<boolean> {
  const write = (list: readonly F[] | undefined) => {
    for (const frame of list ?? []) writer.write(frame);
  };
  try {
    write(frames.start?.());
    for await (const event of events) {
      if (writer.closed) {
        writer.end();
        return false;
      }
      write(frames.next(event));
    }
    write(frames.finish?.());
    if (end === 'done') writer.done?.();
    else if (end === 'end') writer.end();
    return true;
  } catch (err) {
    writer.fail(err);
    return false;
  }
}
