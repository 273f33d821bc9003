/**
 * The stream pump every streaming route runs: a generation's events turned into frames by the
 * surface's translator and written in order, the stream ended or failed in one way. A client that
 * leaves ends the loop (the generation is cancelled through its signal); a failure after the first
 * frame is the writer's `fail` (the surface's error frame, or only a log line for a client that
 * left).
 *
 * @module
 */
import type { StreamWriter } from './ndjson.js';

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
