/**
 * The file a download writes into, with its SHA-256, run on a worker thread. The main thread only
 * receives from the registry into a ring of memory it shares with the worker (a SharedArrayBuffer,
 * handed over once): either socket reads land in the ring directly ({@link BlobFile.region} and
 * {@link BlobFile.fill}) or batches of about 1 MiB are copied into it ({@link BlobFile.write}).
 * The worker writes each batch at its position and, when asked, feeds it to the running hash.
 * Receiving, hashing and writing so overlap on separate cores instead of taking turns on the
 * event loop, which is what lets a pull keep up with `curl` while it also checks the digest.
 *
 * Why a shared ring rather than moving each batch's memory to the worker: every ArrayBuffer that
 * arrives in a thread counts there as new external memory, and a pull's worth of them made V8 run
 * major collections in the middle of pulls (bench/results/2026-11-pull.md). With the ring, no
 * memory crosses threads after the first message, and the
 * HTTP client's chunks die young on the main thread.
 *
 * Workers are pooled with their rings: an idle one is kept (unreferenced) for the next download.
 *
 * @module
 */
import { Worker } from 'node:worker_threads';

/**
 * The worker's code, plain CommonJS evaluated as a string so that it runs the same from the
 * TypeScript sources (under tsx) and from the transpiled `dist/`. One job at a time; every message
 * but the first (the ring) gets exactly one reply, in order.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
const { createHash } = require('node:crypto');
let fd = -1;
let hash = null;
let ring = null;
function writeAll(bufs, pos) {
  let n = fs.writevSync(fd, bufs, pos);
  for (const buf of bufs) {
    if (n >= buf.length) { n -= buf.length; pos += buf.length; continue; }
    let off = n;
    n = 0;
    while (off < buf.length) off += fs.writeSync(fd, buf, off, buf.length - off, pos + off);
    pos += buf.length;
  }
}
function hashFile(from, to) {
  const chunk = Buffer.allocUnsafe(1 << 20);
  let pos = from;
  while (pos < to) {
    const n = fs.readSync(fd, chunk, 0, Math.min(chunk.length, to - pos), pos);
    if (n === 0) throw Object.assign(new Error('the file ended before ' + to + ' bytes'), { code: 'LIA_SHORT_FILE' });
    hash.update(chunk.subarray(0, n));
    pos += n;
  }
  return to - from;
}
parentPort.on('message', (m) => {
  if (m.op === 'ring') { ring = Buffer.from(m.ring); return; }
  try {
    switch (m.op) {
      case 'open':
        fd = fs.openSync(m.path, m.size === undefined ? 'r+' : 'w+');
        if (m.size !== undefined) fs.ftruncateSync(fd, m.size);
        hash = createHash('sha256');
        return parentPort.postMessage({ ok: 0 });
      case 'write': {
        // The batch is one or two spans of the ring (two when it wraps around its end).
        const bufs = [];
        for (let i = 0; i < m.spans.length; i += 2) bufs.push(ring.subarray(m.spans[i], m.spans[i] + m.spans[i + 1]));
        writeAll(bufs, m.pos);
        let size = 0;
        for (const buf of bufs) {
          if (m.hash) hash.update(buf);
          size += buf.length;
        }
        return parentPort.postMessage({ ok: size });
      }
      case 'hashFile': return parentPort.postMessage({ ok: hashFile(m.from, m.to) });
      case 'restartHash': hash = createHash('sha256'); return parentPort.postMessage({ ok: 0 });
      case 'finish': { const hex = hash.digest('hex'); const f = fd; hash = null; fd = -1; fs.closeSync(f); return parentPort.postMessage({ ok: hex }); }
      case 'close': if (fd >= 0) fs.closeSync(fd); fd = -1; hash = null; return parentPort.postMessage({ ok: 0 });
    }
  } catch (err) {
    parentPort.postMessage({ error: { message: err.message, code: err.code } });
  }
});
`;

/** Bytes a download may have handed over but not yet written before it waits. */
const MAX_IN_FLIGHT = 8 * 1024 * 1024;
/**
 * Size of the ring shared with a worker: twice what may be in flight, so that a batch of up to
 * MAX_IN_FLIGHT bytes always fits after {@link BlobFile.write} said there is room.
 */
const RING_BYTES = 2 * MAX_IN_FLIGHT;

/** Bytes filled in place that go to the writer in one message. */
const STAGE_BYTES = 1 << 20;

/** A writer thread and the memory it shares with the main thread. */
interface Writer {
  worker: Worker;
  ring: Buffer;
}

/** Idle writers kept for the next download. */
const MAX_IDLE = 2;
const idle: Writer[] = [];

function newWriter(): Writer {
  const worker = new Worker(WORKER_SOURCE, { eval: true });
  const ring = Buffer.from(new SharedArrayBuffer(RING_BYTES));
  worker.postMessage({ op: 'ring', ring: ring.buffer });
  return { worker, ring };
}

type Reply = { ok: number | string } | { error: { message: string; code?: string } };
interface Pending {
  resolve(value: number | string): void;
  reject(err: Error): void;
}

/** The worker itself failed: nothing more can be written through it (not worth a retry). */
function writerGone(message: string): Error {
  return Object.assign(new Error(message), { name: 'WorkerGone', code: 'LIA_WRITER_GONE' });
}

/** A file being downloaded, written and hashed on a worker thread. */
export class BlobFile {
  readonly #writer: Writer;
  readonly #worker: Worker;
  readonly #pending: Pending[] = [];
  /** Bytes copied into the ring and not yet written; they end at #head. */
  #inFlight = 0;
  #head = 0;
  /** The ring memory last handed out by {@link region}, until it is filled. */
  #region: Buffer | null = null;
  /** Bytes filled in place and not yet sent to the writer (part of #inFlight). */
  #staged: { start: number; size: number; pos: number; hash: boolean; onWritten?: ((bytes: number) => void) | undefined } | null = null;
  #waiters: Array<() => void> = [];
  #failure: Error | null = null;
  #closed = false;

  private constructor(writer: Writer) {
    this.#writer = writer;
    const worker = (this.#worker = writer.worker);
    worker.on('message', this.#onMessage);
    worker.on('error', this.#onCrash);
    worker.on('exit', this.#onExit);
  }

  /**
   * Opens `path` for positional writes and a fresh hash: the file as it is (a resumed download),
   * or, with `create`, a new file of `create` bytes (an existing one is emptied first).
   */
  static async open(path: string, create?: number): Promise<BlobFile> {
    const file = new BlobFile(idle.pop() ?? newWriter());
    try {
      await file.#call({ op: 'open', path, size: create });
    } catch (err) {
      await file.close();
      throw err;
    }
    return file;
  }

  /**
   * Copies a batch (at most 8 MiB) into the shared ring to be written at `pos`, and hashed when
   * `hash` is true (the caller keeps hashed writes contiguous from the start of the blob); the
   * caller's buffers are free again as soon as this returns. `onWritten` runs once the batch is
   * on disk. Returns false, like a stream's `write`, when 8 MiB or more are in flight: wait for
   * {@link room} before the next batch. Throws the first failure of an earlier write.
   */
  write(batch: Buffer[], pos: number, hash: boolean, onWritten?: (bytes: number) => void): boolean {
    if (this.#failure) throw this.#failure;
    const size = batch.reduce((n, b) => n + b.length, 0);
    if (size === 0) return this.#inFlight < MAX_IN_FLIGHT;
    if (this.#inFlight + size > RING_BYTES) throw new RangeError(`BlobFile.write: ${size} bytes do not fit; wait for room() after write() returns false`);
    this.#flush();
    this.#region = null;
    // The batch starts at #head and wraps around the ring's end at most once.
    const ring = this.#writer.ring;
    const start = this.#head;
    for (const b of batch) {
      const first = Math.min(b.length, RING_BYTES - this.#head);
      b.copy(ring, this.#head, 0, first);
      if (first < b.length) b.copy(ring, 0, first);
      this.#head = (this.#head + b.length) % RING_BYTES;
    }
    const spans = start + size <= RING_BYTES ? [start, size] : [start, RING_BYTES - start, 0, start + size - RING_BYTES];
    this.#inFlight += size;
    this.#send(spans, pos, hash, size, onWritten);
    return this.#inFlight < MAX_IN_FLIGHT;
  }

  /**
   * Free memory at the head of the ring (at most `max` bytes, never across the ring's end) for
   * the next socket read to land in, so the bytes need no copy: hand the read to {@link fill}.
   * Null when the ring is full. Only one writer may use regions at a time (a download of one
   * part): the region is the ring's head, which the next fill or write takes.
   */
  region(max: number): Buffer | null {
    const size = Math.min(max, RING_BYTES - this.#inFlight, RING_BYTES - this.#head);
    this.#region = size > 0 && !this.#failure ? this.#writer.ring.subarray(this.#head, this.#head + size) : null;
    return this.#region;
  }

  /**
   * Takes `n` bytes that arrived at the start of `buf` to be written at `pos` (and hashed when
   * `hash`): in place when `buf` is the last {@link region}, else copied as {@link write} does.
   * Reads that follow each other in the ring and in the file go to the writer together, in
   * batches of about 1 MiB. Returns false when the caller should wait for {@link room}.
   */
  fill(buf: Uint8Array, n: number, pos: number, hash: boolean, onWritten?: (bytes: number) => void): boolean {
    if (this.#failure) throw this.#failure;
    const region = this.#region;
    this.#region = null;
    if (!region || buf.buffer !== region.buffer || buf.byteOffset !== region.byteOffset || n > region.length) {
      return this.write([Buffer.from(buf.buffer, buf.byteOffset, n)], pos, hash, onWritten);
    }
    if (n === 0) return this.#inFlight < MAX_IN_FLIGHT;
    const s = this.#staged;
    if (s && s.start + s.size === this.#head && s.pos + s.size === pos && s.hash === hash && s.onWritten === onWritten) s.size += n;
    else {
      this.#flush();
      this.#staged = { start: this.#head, size: n, pos, hash, onWritten };
    }
    this.#head = (this.#head + n) % RING_BYTES;
    this.#inFlight += n;
    if (this.#staged!.size >= STAGE_BYTES || this.#head === 0) this.#flush();
    return this.#inFlight < MAX_IN_FLIGHT;
  }

  /** Sends the bytes filled in place so far to the writer. */
  #flush(): void {
    const s = this.#staged;
    if (!s) return;
    this.#staged = null;
    this.#send([s.start, s.size], s.pos, s.hash, s.size, s.onWritten);
  }

  /** Asks the writer to write (and maybe hash) `spans` of the ring, `size` bytes counted in flight. */
  #send(spans: number[], pos: number, hash: boolean, size: number, onWritten?: (bytes: number) => void): void {
    this.#call({ op: 'write', spans, pos, hash })
      .then(
        () => onWritten?.(size),
        () => undefined, // recorded in #failure by #onMessage / #fail
      )
      .finally(() => {
        this.#inFlight -= size;
        for (const w of this.#waiters.splice(0)) w();
      });
  }

  /** Resolves when there is room for more writes (or a write failed: the next one throws). */
  async room(): Promise<void> {
    this.#flush();
    while (this.#inFlight >= MAX_IN_FLIGHT && !this.#failure) await this.#idle();
  }

  /** Waits until every accepted write is on disk; throws the first failure. */
  async drain(): Promise<void> {
    this.#flush();
    while (this.#inFlight > 0 && !this.#failure) await this.#idle();
    if (this.#failure) throw this.#failure;
  }

  #idle(): Promise<void> {
    return new Promise<void>((resolve) => this.#waiters.push(resolve));
  }

  /**
   * Begins the running hash again, once every accepted write is on disk: for a download that starts
   * over from the blob's first byte (a registry that ignored a Range request).
   */
  async restartHash(): Promise<void> {
    await this.drain();
    await this.#call({ op: 'restartHash' });
  }

  /** Hashes the file's bytes [from, to) (after the contiguous hashed writes). */
  async hashFile(from: number, to: number): Promise<number> {
    this.#flush();
    return (await this.#call({ op: 'hashFile', from, to })) as number;
  }

  /**
   * Closes the file once every write is on disk and returns the hex SHA-256 of everything hashed
   * (one message to the writer instead of two); the worker goes back to the pool.
   */
  async finish(): Promise<string> {
    await this.drain();
    this.#closed = true;
    try {
      return (await this.#call({ op: 'finish' })) as string;
    } finally {
      await this.#release();
    }
  }

  /** Closes the file and returns the worker to the pool (or ends it). Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#region = null;
    if (!this.#failure) this.#flush();
    if (this.#healthy) await this.#call({ op: 'close' }).catch(() => undefined);
    await this.#release();
  }

  get #healthy(): boolean {
    return !this.#failure || this.#failure.name !== 'WorkerGone';
  }

  /** Gives the worker back to the pool, or ends it when it failed or the pool is full. */
  async #release(): Promise<void> {
    const healthy = this.#healthy;
    this.#worker.off('message', this.#onMessage).off('error', this.#onCrash).off('exit', this.#onExit);
    if (healthy && idle.length < MAX_IDLE) {
      this.#worker.unref();
      idle.push(this.#writer);
    } else {
      await this.#worker.terminate();
    }
  }

  #call(message: Record<string, unknown>): Promise<number | string> {
    if (this.#failure?.name === 'WorkerGone') return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#worker.postMessage(message);
    });
  }

  readonly #onMessage = (reply: Reply): void => {
    const p = this.#pending.shift();
    if (!p) return;
    if ('ok' in reply) return p.resolve(reply.ok);
    const err = Object.assign(new Error(reply.error.message), { code: reply.error.code });
    this.#failure ??= err;
    p.reject(err);
  };

  readonly #onCrash = (err: Error): void => this.#fail(writerGone(`the download writer failed: ${err.message}`));
  readonly #onExit = (): void => this.#fail(writerGone('the download writer stopped'));

  #fail(err: Error): void {
    this.#failure = err;
    for (const p of this.#pending.splice(0)) p.reject(err);
    for (const w of this.#waiters.splice(0)) w();
  }
}

/** Gathers network chunks into batches of at least `size` bytes (1 MiB by default). */
export class Batcher {
  #chunks: Buffer[] = [];
  #bytes = 0;

  constructor(readonly size = 1 << 20) {}

  /** Adds a chunk; returns a full batch when one is ready. */
  push(chunk: Buffer): Buffer[] | null {
    if (chunk.length === 0) return null;
    this.#chunks.push(chunk);
    this.#bytes += chunk.length;
    return this.#bytes >= this.size ? this.take() : null;
  }

  /** Whatever is gathered (null when nothing is). */
  take(): Buffer[] | null {
    if (this.#bytes === 0) return null;
    const out = this.#chunks;
    this.#chunks = [];
    this.#bytes = 0;
    return out;
  }
}
