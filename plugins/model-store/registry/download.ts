/**
 * Blob downloads: parallel ranged parts for large blobs, retries after a dropped connection or a
 * stall, resume after a restart (part state in `<blob>-partial.json`), one stream from the start
 * for a registry that ignores `Range` (see {@link BlobDownload}), the SHA-256 checked before
 * the blob is renamed into place, and one shared download per digest however many pulls wait on
 * it; it is cancelled only when the last of them goes away. Part planning and state are in
 * parts.ts, the retry policy in retry.ts, small blobs in small-blob.ts, receiving a body in
 * receive.ts, and the writer thread that writes and hashes in blob-file.ts.
 *
 * @module
 */
import { rename, rm } from 'node:fs/promises';
import { Errors } from 'lia/plugin';
import type { BlobStore } from '../store/blobs.js';
import { corruptDownload, storageError } from '../store/errors.js';
import { BlobFile } from './blob-file.js';
import { bodyError } from './http.js';
import type { RegistryClient, Repository } from './client.js';
import { loadParts, partFiles, planParts, saveParts, type Part } from './parts.js';
import { backoff, retryable } from './retry.js';
import { receiveBody } from './receive.js';
import { fetchSmallBlob, SMALL_BLOB } from './small-blob.js';

/** Tuning of downloads (plugin options). */
export interface DownloadOptions {
  /** Smallest part of a ranged download. */
  partMinBytes: number;
  /** Most parts per blob. */
  maxParts: number;
  /** Retries per part after a failed attempt that made no progress. */
  retries: number;
}

/** How many bytes from the start of the blob the running SHA-256 (in the {@link BlobFile}) has seen. */
interface Hasher {
  cursor: number;
}

/**
 * A registry that honoured `Range` for some parts answered another with the whole blob (200): the
 * parts stop and the blob is downloaded again in one stream from its start.
 */
class RangeIgnored extends Error {}

/**
 * One blob being downloaded, shared by every pull that needs it.
 *
 * Every request asks for a byte range. A registry that honours it answers 206 and a large blob
 * comes in parallel parts; one that ignores it answers 200 with the whole blob from its first
 * byte. The first part that still needs bytes therefore goes alone until an answer shows which
 * kind the registry is: on a 206 the other parts start beside it; on a 200 that answer becomes
 * the blob's only stream, so a registry without ranges gets one request per blob, not one per
 * part. After a cut the stream asks for the rest with `Range`; a 206 continues it, a 200 starts
 * the blob over from that answer (what is on disk is overwritten and the hash begins again),
 * never asking again for what it already has. Attempts that get no further than an earlier one
 * count towards `retries`.
 */
export class BlobDownload {
  readonly digest: string;
  readonly total: number;
  #parts: Part[] = [];
  #waiters = 0;
  readonly #abort = new AbortController();
  readonly #done: Promise<void>;
  #markReady!: () => void;
  /** Resolves once the parts are known (a resumed download knows its progress from then on). */
  readonly ready = new Promise<void>((resolve) => (this.#markReady = resolve));
  /** Bytes already on disk when this process started (resumed). */
  resumedFrom = 0;
  /** Why the partial file could not be opened: not the network's fault, so never retried. */
  #openFailure: unknown;
  /** The running hash of the blob's first bytes. */
  readonly #hasher: Hasher = { cursor: 0 };
  /** Whether the registry honours `Range`: null until an answer shows it (see the class comment). */
  #ranges: boolean | null = null;
  #learnt!: (honoured: boolean) => void;
  /** Resolves with {@link #ranges} once known; false too when the download fails before. */
  readonly #rangesKnown = new Promise<boolean>((resolve) => (this.#learnt = resolve));

  constructor(
    readonly repo: Repository,
    digest: string,
    total: number,
    readonly client: RegistryClient,
    readonly blobs: BlobStore,
    readonly options: DownloadOptions,
  ) {
    this.digest = digest;
    this.total = total;
    this.#done = this.#run();
    this.#done.catch(() => undefined).finally(() => this.#markReady());
  }

  /** Bytes received so far. */
  get completed(): number {
    return this.#parts.reduce((n, p) => n + p.completed, 0);
  }

  /**
   * Waits for the download as one more interested party. When `signal` aborts, this party
   * leaves; when the last one leaves, the download stops (its parts stay for a resume).
   */
  async join(signal: AbortSignal): Promise<void> {
    if (signal.aborted) throw signal.reason;
    this.#waiters++;
    // One listener per party, removed when it leaves: a pull joins one download per layer on one signal.
    let gone!: (reason: unknown) => void;
    const left = new Promise<never>((_, reject) => (gone = reject));
    left.catch(() => undefined);
    const leave = (): void => {
      if (--this.#waiters === 0) this.#abort.abort(new Error('every client waiting for this download went away'));
      gone(signal.reason);
    };
    signal.addEventListener('abort', leave, { once: true });
    try {
      await Promise.race([this.#done, left]);
    } finally {
      if (!signal.aborted) {
        signal.removeEventListener('abort', leave);
        this.#waiters--;
      }
    }
  }

  /** Stops the download (the appliance is shutting down); its part files stay for a resume. */
  cancel(): void {
    this.#abort.abort(new Error('the appliance is shutting down'));
  }

  /** Resolves when finished (however it ended); used by the registry of downloads. */
  get settled(): Promise<void> {
    return this.#done.then(
      () => undefined,
      () => undefined,
    );
  }

  get #final(): string {
    return this.blobs.path(this.digest);
  }
  get #partial(): string {
    return partFiles(this.#final).partial;
  }

  #saveState(): Promise<void> {
    return saveParts(this.#final, this.digest, this.total, this.#parts);
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    if (this.total <= SMALL_BLOB) return this.#runSmall(signal);
    const resumed = await loadParts(this.#final, this.digest, this.total);
    this.#parts = resumed ?? planParts(this.total, this.options.partMinBytes, this.options.maxParts);
    if (resumed) this.resumedFrom = this.completed;
    for (const p of this.#parts) p.written = p.completed;
    // The file is prepared while the first requests go out (see #attempt).
    const opening = this.#open(resumed !== null);
    opening.catch(() => undefined);
    this.#markReady();
    let got: string;
    try {
      got = `sha256:${await this.#fetchParts(opening, signal)}`;
    } finally {
      await opening.then(
        (file) => file.close(),
        () => undefined,
      );
    }
    if (got !== this.digest) {
      await this.#discard();
      throw corruptDownload(this.digest, got);
    }
    // Without its state file a leftover partial is never resumed, so the two can go at once.
    await Promise.all([rename(this.#partial, this.#final), rm(partFiles(this.#final).state, { force: true })]);
  }

  /** Opens the partial file: as it is for a resumed download, else new and sized, with its state saved. */
  async #open(resumed: boolean): Promise<BlobFile> {
    try {
      if (resumed) return await BlobFile.open(this.#partial);
      // The state only counts once the file has its full size (see loadParts), so both can go at once.
      const [file] = await Promise.all([BlobFile.open(this.#partial, this.total), this.#saveState()]);
      return file;
    } catch (err) {
      throw (this.#openFailure = storageError(err, 'preparing a download'));
    }
  }

  /**
   * Downloads every part into the file (still `opening` when the first requests go out) and
   * returns the hex SHA-256 of the whole blob. The first part is hashed as it arrives (for blobs
   * under two parts' size, that is all of it); the rest is read back from the file afterwards,
   * while it is still in the page cache.
   */
  async #fetchParts(opening: Promise<BlobFile>, signal: AbortSignal): Promise<string> {
    const hasher = this.#hasher;
    const first = this.#parts[0];
    if (first && first.completed > 0) hasher.cursor = await (await opening).hashFile(0, first.completed);
    const saver = setInterval(() => void this.#saveState(), 1000);
    try {
      try {
        await this.#downloadAll(opening, signal);
      } catch (err) {
        if (!(err instanceof RangeIgnored)) throw err;
        await this.#downloadPart(await this.#startOver(await opening), opening, signal);
      }
    } catch (err) {
      await this.#saveState();
      throw err;
    } finally {
      clearInterval(saver);
    }
    const file = await opening;
    if (hasher.cursor < this.total) hasher.cursor += await file.hashFile(hasher.cursor, this.total);
    return file.finish();
  }

  /** A small blob: fetched into memory in one request (see small-blob.ts). */
  async #runSmall(signal: AbortSignal): Promise<void> {
    const part: Part = { start: 0, end: this.total - 1, completed: 0 };
    this.#parts = [part];
    this.#markReady();
    const { client, repo, digest, total, blobs } = this;
    await fetchSmallBlob({ client, repo, digest, total, blobs, retries: this.options.retries }, signal, (n) => (part.completed = n));
  }

  /** Removes every trace of this download. */
  async #discard(): Promise<void> {
    await rm(this.#partial, { force: true });
    await rm(partFiles(this.#final).state, { force: true });
  }

  /**
   * Downloads the parts that still need bytes: the first alone until the registry shows whether it
   * honours `Range`, then the others beside it when it does. When one part fails, the others stop
   * (and have written what they received) before the failure is thrown.
   */
  async #downloadAll(opening: Promise<BlobFile>, signal: AbortSignal): Promise<void> {
    const [lead, ...rest] = this.#parts.filter((p) => p.completed < p.end - p.start + 1);
    if (!lead) return;
    const round = new AbortController();
    const partSignal = AbortSignal.any([signal, round.signal]);
    const runs = [
      this.#downloadPart(lead, opening, partSignal).finally(() => this.#learn(false)),
      ...rest.map(async (p) => {
        if (await this.#rangesKnown) await this.#downloadPart(p, opening, partSignal);
      }),
    ];
    try {
      await Promise.all(runs);
    } catch (err) {
      round.abort(err);
      await Promise.allSettled(runs);
      throw err;
    }
  }

  #learn(honoured: boolean): void {
    if (this.#ranges !== null) return;
    this.#ranges = honoured;
    this.#learnt(honoured);
  }

  /**
   * Makes the download one stream from the blob's first byte: `part` (a new one by default)
   * becomes the only part, with nothing received, and the hash begins again. Nothing else may be
   * writing to the file.
   */
  async #startOver(file: BlobFile, part: Part = { start: 0, end: 0, completed: 0 }): Promise<Part> {
    Object.assign(part, { start: 0, end: this.total - 1, completed: 0, written: 0 });
    this.#parts = [part];
    await file.restartHash();
    this.#hasher.cursor = 0;
    return part;
  }

  async #downloadPart(part: Part, opening: Promise<BlobFile>, signal: AbortSignal): Promise<void> {
    let failures = 0;
    /** The most bytes an attempt reached: one that gets no further (a cut after a start over) made no progress. */
    let reached = part.completed;
    while (part.completed < part.end - part.start + 1) {
      try {
        await this.#attempt(part, opening, signal);
        if (part.completed < part.end - part.start + 1) throw Object.assign(new Error('the registry closed the connection early'), { code: 'ECONNRESET' });
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (err instanceof RangeIgnored || !retryable(err) || err === this.#openFailure) throw err;
        failures = part.completed > reached ? 0 : failures + 1;
        reached = Math.max(reached, part.completed);
        if (failures > this.options.retries) {
          throw bodyError(err, this.repo.name.host, `download of ${this.digest}`);
        }
        await backoff(failures, signal);
      }
    }
  }

  async #attempt(part: Part, opening: Promise<BlobFile>, signal: AbortSignal): Promise<void> {
    let from = part.start + part.completed;
    const answer = this.client.getBlob(this.repo, this.digest, [from, part.end], signal);
    answer.catch(() => undefined); // awaited below, unless the file fails first
    let file: BlobFile;
    try {
      file = await opening;
    } catch (err) {
      void answer.then(
        (res) => res.body.destroy(),
        () => undefined,
      );
      throw err;
    }
    const res = await answer;
    if (res.status === 200) {
      // The registry ignored the Range: the body is the whole blob, from its first byte.
      if (this.#ranges === true && this.#parts.length > 1) {
        res.body.destroy(); // other parts are downloading: they stop first (see #fetchParts)
        throw new RangeIgnored(`registry ${this.repo.name.host} ignored a Range request for ${this.digest}`);
      }
      this.#learn(false);
      if (from !== 0 || part.end !== this.total - 1) await this.#startOver(file, part);
      from = 0;
    } else if (res.status !== 206) {
      await this.client.expectOk(res, `download ${this.digest}`);
    } else {
      const m = /bytes (\d+)-/.exec(String(res.headers['content-range'] ?? ''));
      if (!m || Number(m[1]) !== from) {
        res.body.destroy();
        throw Errors.badGateway(`registry ${this.repo.name.host} answered a Range request with the wrong range`);
      }
      this.#learn(true);
    }
    // Hash inline only when this range continues exactly where the hash stopped, in the part that
    // begins the blob (the other parts' bytes are read back from the file at the end).
    const hasher = this.#hasher;
    const inline = part.start === 0 && hasher.cursor === from ? hasher : null;
    try {
      await receiveBody(res.body, {
        file,
        pos: from,
        limit: part.end - from + 1,
        hash: inline !== null,
        // Parts downloaded side by side share the file's ring, which only one may read into.
        inPlace: this.#parts.length === 1,
        onBytes: (n) => {
          part.completed += n;
          if (inline) inline.cursor += n;
        },
        onWritten: (n) => (part.written = (part.written ?? 0) + n),
      });
    } finally {
      // What arrived is kept (written, and counted for a resume) however the attempt ended.
      try {
        await file.drain();
      } catch (err) {
        // eslint-disable-next-line no-unsafe-finally
        throw storageError(err, 'writing a download');
      }
    }
  }
}

/** The downloads in flight, one per digest. */
export class Downloads {
  readonly #active = new Map<string, BlobDownload>();

  constructor(
    readonly client: RegistryClient,
    readonly blobs: BlobStore,
    readonly options: DownloadOptions,
  ) {}

  /** Stops every running download and waits until they have saved their state. */
  async cancelAll(): Promise<void> {
    const running = [...this.#active.values()];
    for (const d of running) d.cancel();
    await Promise.all(running.map((d) => d.settled));
  }

  /** The running download of `digest`, or a new one. */
  get(repo: Repository, digest: string, total: number): BlobDownload {
    let d = this.#active.get(digest);
    if (!d) {
      d = new BlobDownload(repo, digest, total, this.client, this.blobs, this.options);
      this.#active.set(digest, d);
      const mine = d;
      void d.settled.then(() => {
        if (this.#active.get(digest) === mine) this.#active.delete(digest);
      });
    }
    return d;
  }
}
