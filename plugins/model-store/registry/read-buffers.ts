/**
 * Socket read buffers that belong to one reader. Each read of a plain-HTTP registry connection
 * (see http.ts) gets a fresh buffer from here; the body chunks cut from it can then be handed to
 * the download's writer thread by moving the memory instead of copying it (see blob-file.ts),
 * even when a chunk is only part of its buffer.
 *
 * @module
 */

const exclusive = new WeakSet<ArrayBuffer>();

/** The size of buffers worth keeping for reuse (the large reads of a streaming body). */
export const LARGE_READ = 1024 * 1024;
/** At most this many spare large buffers are kept (16 MiB, what a download has in flight). */
const MAX_SPARE = 16;
/**
 * Large buffers given back after use. Reusing them spares the kernel mapping, zeroing and
 * unmapping fresh memory for every read (a 71 MB blob is 71 such buffers).
 */
const spare: ArrayBuffer[] = [];

/** A buffer of `size` bytes (uninitialised), marked as belonging to its reader alone. */
export function readBuffer(size: number): Buffer {
  const reused = size === LARGE_READ ? spare.pop() : undefined;
  if (reused) return Buffer.from(reused);
  const buf = Buffer.allocUnsafeSlow(size);
  exclusive.add(buf.buffer as ArrayBuffer);
  return buf;
}

/** Takes back memory that nothing references any more (a writer thread returned it). */
export function recycle(ab: ArrayBuffer): void {
  if (ab.byteLength !== LARGE_READ || spare.length >= MAX_SPARE) return;
  exclusive.add(ab);
  spare.push(ab);
}

/**
 * True when `buf`'s memory may be moved to another thread: it came from {@link readBuffer}, or
 * it spans the whole of its (non-shared) ArrayBuffer.
 */
export function movable(buf: Buffer): boolean {
  const ab = buf.buffer;
  if (ab instanceof SharedArrayBuffer) return false;
  return exclusive.has(ab) || (buf.byteOffset === 0 && buf.byteLength === ab.byteLength);
}
