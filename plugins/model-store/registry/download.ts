/**
 * Blob downloads: parallel ranged parts for large blobs, retries after a dropped connection or a
 * stall, resume after a restart (part state in `<blob>-partial.json`), the SHA-256 checked before
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

/** One blob being downloaded, shared by every pull that needs it. */
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
    this.#waiters++;
    const leave = (): void => {
      if (--this.#waiters === 0) this.#abort.abort(new Error('every client waiting for this download went away'));
    };
    signal.addEventListener('abort', leave, { once: true });
    try {
      await Promise.race([
        this.#done,
        new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true })),
      ]);
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
    const hasher: Hasher = { cursor: 0 };
    const first = this.#parts[0];
    if (first && first.completed > 0) hasher.cursor = await (await opening).hashFile(0, first.completed);
    const saver = setInterval(() => void this.#saveState(), 1000);
    try {
      await Promise.all(this.#parts.map((p, i) => this.#downloadPart(p, i === 0 ? hasher : null, opening, signal)));
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

  async #downloadPart(part: Part, hasher: Hasher | null, opening: Promise<BlobFile>, signal: AbortSignal): Promise<void> {
    const size = part.end - part.start + 1;
    let failures = 0;
    while (part.completed < size) {
      const before = part.completed;
      try {
        await this.#attempt(part, hasher, opening, signal);
        if (part.completed < size) throw Object.assign(new Error('the registry closed the connection early'), { code: 'ECONNRESET' });
      } catch (err) {
        if (signal.aborted) throw signal.reason;
        if (!retryable(err) || err === this.#openFailure) throw err;
        failures = part.completed > before ? 0 : failures + 1;
        if (failures > this.options.retries) {
          throw bodyError(err, this.repo.name.host, `download of ${this.digest}`);
        }
        await backoff(failures, signal);
      }
    }
  }

  async #attempt(part: Part, hasher: Hasher | null, opening: Promise<BlobFile>, signal: AbortSignal): Promise<void> {
    const from = part.start + part.completed;
    const answer = this.client.getBlob(this.repo, this.digest, [from, part.end], signal);
    answer.catch(() => undefined); // awaited below, unless the file fails first
    let file: BlobFile;
    try {
      file = await opening;
    } catch (err) {
      void answer.then((res) => res.body.destroy(), () => undefined);
      throw err;
    }
    const res = await answer;
    if (res.status === 200 && from !== 0) {
      res.body.destroy();
      throw Errors.badGateway(`registry ${this.repo.name.host} ignored a Range request for ${this.digest}`);
    }
    if (res.status !== 200 && res.status !== 206) {
      await this.client.expectOk(res, `download ${this.digest}`);
    }
    if (res.status === 206) {
      const m = /bytes (\d+)-/.exec(String(res.headers['content-range'] ?? ''));
      if (!m || Number(m[1]) !== from) {
        res.body.destroy();
        throw Errors.badGateway(`registry ${this.repo.name.host} answered a Range request with the wrong range`);
      }
    }
    // Hash inline only when this range continues exactly where the hash stopped.
    const inline = hasher !== null && hasher.cursor === from ? hasher : null;
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
