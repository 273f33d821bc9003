/**
 * Receiving one response body of a blob download into its {@link BlobFile}. On a plain-HTTP
 * connection the body is tapped off the socket (large-reads.ts): reads land in the file's shared
 * ring in place, so a byte is copied once, by the kernel, between the socket and the writer
 * thread. Otherwise (HTTPS, a chunked body, a blob downloaded in several parts at once, which
 * share the ring) the HTTP client's chunks are gathered into batches and copied into the ring.
 *
 * The runs: bench/results/2026-11-pull.md.
 *
 * @module
 */
import type { IncomingMessage } from 'node:http';
import { Batcher, type BlobFile } from './blob-file.js';
import { tapBody } from './large-reads.js';

/** The largest socket read that lands in the ring. */
const READ_BYTES = 1024 * 1024;

/** Where a body goes. */
export interface BodyTarget {
  file: BlobFile;
  /** File position of the body's first byte. */
  pos: number;
  /** Bytes wanted; anything after them is ignored. */
  limit: number;
  /** Whether the bytes feed the file's running hash. */
  hash: boolean;
  /** Whether socket reads may land in the ring: only one body at a time may do so per file. */
  inPlace: boolean;
  /** Hears each received byte count (before it is on disk). */
  onBytes: (n: number) => void;
  /** Hears each written byte count. */
  onWritten: (n: number) => void;
}

/**
 * Receives `body` into `t.file` until `t.limit` bytes arrived or the body ends, then closes the
 * body. A connection cut mid-body throws its network error (ECONNRESET) or, when it closed
 * quietly, just returns early: either way the caller compares what arrived with what it wanted
 * and retries from there. Writes may still be in flight when this returns: drain the file.
 * Throws the body's error, or the file's.
 */
export async function receiveBody(body: IncomingMessage, t: BodyTarget): Promise<void> {
  let received = 0;
  let pos = t.pos;
  /** Where the body ends for us: the wanted range, or (tapped) the body's own end if that is sooner. */
  let end = t.limit;
  /** Counts `n` arrived bytes, clipped to {@link end}; returns how many count. */
  const count = (n: number): number => {
    n = Math.min(n, end - received);
    received += n;
    t.onBytes(n);
    return n;
  };
  const batcher = new Batcher();
  /** Hands a batch to the file; false when the body must wait until the file has room. */
  const put = (batch: Buffer[] | null): boolean => {
    if (!batch) return true;
    const at = pos;
    pos += batch.reduce((n, b) => n + b.length, 0);
    return t.file.write(batch, at, t.hash, t.onWritten);
  };
  /** A chunk from the HTTP parser. */
  const take = (chunk: Buffer): boolean => put(batcher.push(chunk.subarray(0, count(chunk.length))));

  let finish!: (err?: Error) => void;
  const ended = new Promise<void>((resolve, reject) => {
    finish = (err) => (err ? reject(err) : resolve());
  });
  const tap = t.inPlace
    ? tapBody(body, {
        region: () => (received < end ? t.file.region(Math.min(READ_BYTES, end - received)) : null),
        received: (buf, n) => {
          try {
            n = Math.min(n, end - received);
            const more = t.file.fill(buf, n, pos, t.hash, t.onWritten);
            pos += count(n);
            if (received >= end) {
              finish();
              return false;
            }
            if (!more) void t.file.room().then(() => tap?.tapped.resume());
            return more;
          } catch (err) {
            finish(err as Error);
            return false;
          }
        },
      })
    : null;
  const onData = (chunk: Buffer): void => {
    try {
      if (!take(chunk)) {
        body.pause();
        void t.file.room().then(() => body.resume());
      }
      if (received >= end) finish();
    } catch (err) {
      finish(err as Error);
    }
  };
  // A cut connection ends the body early ('close' or 'error'); the caller retries from what arrived.
  const onEnd = (err?: Error): void => finish(err);
  body.on('end', onEnd).on('close', onEnd).on('error', onEnd);
  try {
    if (tap) {
      // What the parser already had comes first, in one batch.
      for (const chunk of tap.parsed) take(chunk);
      put(batcher.take());
      // A body shorter than the range ends there (the caller asks again for the rest).
      end = Math.min(end, received + tap.rest);
      if (received >= end) finish();
    } else {
      body.on('data', onData);
    }
    await ended;
  } finally {
    body.off('data', onData).off('end', onEnd).off('close', onEnd).off('error', onEnd);
    tap?.tapped.close();
    body.destroy();
    put(batcher.take());
  }
}
