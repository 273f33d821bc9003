/**
 * Pulling a model: the manifest, then every layer (config included). All missing layers download
 * at once (the small ones finish while the weights still stream); progress is reported layer by
 * layer in manifest order as `pulling layer` lines with `digest`, `total` and `completed` (at its
 * start, at most every 100 ms while it downloads, and at its end). The manifest is written,
 * exactly as the registry sent it, only after every blob is in place and checked.
 *
 * Durability: the answer comes as soon as the model is usable; the new blobs and the manifest are
 * flushed to disk (`fdatasync`, then their folders) right after, in the background, and closing
 * the plugin waits for that. Until then a power cut can lose them as it would a file the kernel
 * has not written back yet (Ollama never flushes a pull; the kernel writes back within ~30 s).
 * Flushing a multi-gigabyte blob before answering would hold every pull up by the disk's full
 * write time.
 *
 * @module
 */
import { setMaxListeners } from 'node:events';
import { statfs } from 'node:fs/promises';
import type { FastifyBaseLogger } from 'fastify';
import { flushToDisk, formatBytes } from 'lia/utils';
import { insufficientStorage } from '../store/errors.js';
import type { Layer } from '../store/manifest.js';
import type { ModelStoreService } from '../store/store.js';
import type { Progress } from '../routes/progress.js';
import type { RegistryClient, Repository } from './client.js';
import { Downloads, type BlobDownload, type DownloadOptions } from './download.js';

/** How often progress lines go out while a layer downloads. */
const TICK_MS = 100;

/** A layer download this pull has joined. */
interface Started {
  download: BlobDownload;
  done: Promise<void>;
}

/** Pulls models from registries into the store; downloads are shared between pulls. */
export class Puller {
  readonly downloads: Downloads;
  readonly #store: ModelStoreService;
  readonly #client: RegistryClient;
  readonly #log: FastifyBaseLogger;
  /** Background flushes of finished pulls (see the module comment). */
  readonly #flushing = new Set<Promise<void>>();

  constructor(store: ModelStoreService, client: RegistryClient, options: DownloadOptions & { log: FastifyBaseLogger }) {
    this.#store = store;
    this.#client = client;
    this.#log = options.log;
    this.downloads = new Downloads(client, store.blobs, options);
  }

  /** Pulls `repo`, emitting progress; throws on failure (the route turns it into an error line). */
  async pull(repo: Repository, emit: (p: Progress) => void, signal: AbortSignal): Promise<void> {
    emit({ status: 'pulling manifest' });
    const { bytes: manifestBytes, manifest } = await this.#client.getManifest(repo, signal);
    const layers = [...manifest.layers, manifest.config];
    const unpin = this.#store.blobs.pin(layers.map((l) => l.digest));
    // Leaves every download this pull joined when it ends early (a failed layer, a gone client).
    const mine = new AbortController();
    // Each layer's download listens to it: as many listeners as layers, by design.
    setMaxListeners(layers.length + 10, mine.signal);
    const leave = (): void => mine.abort(signal.reason);
    signal.addEventListener('abort', leave, { once: true });
    try {
      // What the store already has, looked up once for the space check and the downloads.
      const missing = await Promise.all(layers.map(async (l) => (await this.#store.blobs.size(l.digest)) !== l.size));
      await this.#checkSpace(layers.filter((_, i) => missing[i]));
      const started = layers.map((l, i) => (missing[i] ? this.#start(repo, l, mine.signal) : null));
      // The manifest this pull replaces (if any) is looked up while the blobs download.
      const replaced = this.#store.find(repo.name);
      replaced.catch(() => undefined);
      for (const [i, download] of started.entries()) await this.#report(layers[i]!, download, emit);
      const previous = await replaced;
      const file = await this.#store.writeManifest(repo.name, manifestBytes, { durable: false });
      this.#flushLater([...layers.filter((_, i) => missing[i]).map((l) => this.#store.blobs.path(l.digest)), file]);
      if (previous) {
        const now = await this.#store.find(repo.name);
        if (now && now.digest !== previous.digest) await this.#store.collectGarbage(previous);
      }
    } finally {
      signal.removeEventListener('abort', leave);
      if (!mine.signal.aborted) mine.abort(new Error('pull finished'));
      unpin();
    }
  }

  /** Flushes `files` to disk in the background; a failure is logged (the files stay usable). */
  #flushLater(files: string[]): void {
    const flush = flushToDisk(files).catch((err: Error) => this.#log.warn({ err, files }, 'flushing a pulled model to disk failed'));
    this.#flushing.add(flush);
    void flush.finally(() => this.#flushing.delete(flush));
  }

  /** Fails early, with numbers, when the `missing` layers cannot fit on the disk. */
  async #checkSpace(missing: Layer[]): Promise<void> {
    const needed = missing.reduce((n, l) => n + l.size, 0);
    if (needed === 0) return;
    const fs = await statfs(this.#store.paths.blobs).catch(() => null);
    if (!fs) return;
    const free = fs.bavail * fs.bsize;
    if (free < needed) {
      throw insufficientStorage(`not enough disk space for this model: it needs ${formatBytes(needed)} more, ${formatBytes(free)} are free`);
    }
  }

  /** Joins (or starts) the download of `layer`. */
  #start(repo: Repository, layer: Layer, signal: AbortSignal): Started {
    const download = this.downloads.get(repo, layer.digest, layer.size);
    const done = download.join(signal);
    done.catch(() => undefined); // awaited in #report; a pull that fails earlier never gets there
    return { download, done };
  }

  /** Reports one layer's progress until its download settles. */
  async #report(layer: Layer, started: Started | null, emit: (p: Progress) => void): Promise<void> {
    const line = (completed: number): Progress => ({ status: 'pulling layer', digest: layer.digest, total: layer.size, completed });
    if (!started) {
      emit(line(layer.size));
      return;
    }
    const { download, done } = started;
    await download.ready;
    let last = -1;
    const tick = (): void => {
      const c = download.completed;
      if (c !== last) emit(line((last = c)));
    };
    tick();
    const timer = setInterval(tick, TICK_MS);
    try {
      await done;
    } finally {
      clearInterval(timer);
    }
    if (download.resumedFrom > 0) this.#log.info({ digest: layer.digest, resumedFrom: download.resumedFrom }, 'download resumed');
    emit(line(layer.size));
  }

  /** Stops running downloads (at shutdown; they resume on the next pull) and finishes the flushes. */
  async close(): Promise<void> {
    await this.downloads.cancelAll();
    await Promise.all(this.#flushing);
  }
}
