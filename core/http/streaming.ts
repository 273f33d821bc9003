/**
 * Streamed answers, in both formats the surfaces use: NDJSON (Ollama's: one JSON object per
 * line, {@link startNdjson}) and Server-Sent Events (OpenAI's chat stream and the event streams of
 * the Responses and Messages APIs, {@link startSse}). What every stream shares is written once:
 * the writer a format hands out, the corking of its head with its first frames, the signal that
 * a client left, the pump every streaming route runs (a generation's events turned into frames by
 * the surface's translator and written in order, the stream ended or failed in one way), and how
 * a stream fails after its first frame. A client that leaves ends the loop (the generation is
 * cancelled through its signal); a failure after the first frame (the status is already 200) is
 * only logged for a client that left, else the surface's last frame carries the error.
 *
 * @module
 */
import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { AppError } from '../errors.js';
import { clientLeft } from './client-left.js';
import { drainSignal } from './drain.js';
import { defaultErrorBody, toAppError } from './error-handler.js';

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
 * a stream writes as its last frame: see ./drain.ts).
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

/** Fails the stream of `reply` with `err`; `lastFrame` writes the surface's error frame. */
function failStream(reply: FastifyReply, err: unknown, lastFrame: (error: AppError) => void): void {
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

/**
 * NDJSON: one JSON object per line, flushed as it is written; a failure after the first line is
 * a last `{"error": "..."}` line. Takes over the reply and returns a writer. The caller must have checked everything that can
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

/** How {@link startSse} names and ends its frames. */
export interface SseOptions {
  /** The body of the last frame of a failed stream, in the surface's error format. */
  errorFrame?: (error: AppError) => unknown;
  /**
   * The `event:` name of a frame, from its body (error frames included); `undefined` writes the
   * frame without one. Defaults to none: `data:` lines only.
   */
  eventName?: (body: unknown) => string | undefined;
}

/**
 * Server-Sent Events: `data: <json>\n\n` frames, ended by `data: [DONE]` (OpenAI's chat stream
 * format). With `eventName`, each frame is also named by an `event: <name>` line (the formats of
 * OpenAI's Responses API and Anthropic's Messages API, which end without `[DONE]`: the route calls
 * `end()`). A failure after the first frame is sent as a last data frame whose body the surface
 * gives (`errorFrame`, defaults to `{"error":"message"}`), named by `eventName` too.
 */
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
