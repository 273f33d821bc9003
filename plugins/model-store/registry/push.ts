/**
 * Pushing a model to an OCI registry: `retrieving manifest`, then per blob (layers and config)
 * `pushing layer` lines with `digest`, `total` and `completed` (blobs the registry has are
 * skipped), then `pushing manifest`. The registry name is the model's own name, so a model is
 * first copied to `host/namespace/model:tag`, as with Ollama.
 *
 * @module
 */
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { Errors } from 'lia/plugin';
import type { Layer } from '../store/manifest.js';
import { displayName } from '../store/names.js';
import type { ModelStoreService } from '../store/store.js';
import type { Progress } from '../routes/progress.js';
import type { RegistryClient, Repository } from './client.js';

const TICK_MS = 100;

/** Pushes stored models to registries. */
export class Pusher {
  readonly #store: ModelStoreService;
  readonly #client: RegistryClient;

  constructor(store: ModelStoreService, client: RegistryClient) {
    this.#store = store;
    this.#client = client;
  }

  async push(repo: Repository, emit: (p: Progress) => void, signal: AbortSignal): Promise<void> {
    emit({ status: 'retrieving manifest' });
    const stored = await this.#store.find(repo.name);
    if (!stored) throw Errors.modelNotFound(`model '${displayName(repo.name)}' not found`);
    const bytes = await readFile(stored.file);
    for (const layer of [...stored.manifest.layers, stored.manifest.config]) await this.#pushBlob(repo, layer, emit, signal);
    emit({ status: 'pushing manifest' });
    await this.#client.putManifest(repo, bytes, stored.manifest.mediaType, signal);
  }

  async #pushBlob(repo: Repository, layer: Layer, emit: (p: Progress) => void, signal: AbortSignal): Promise<void> {
    const line = (completed: number): Progress => ({ status: 'pushing layer', digest: layer.digest, total: layer.size, completed });
    const file = this.#store.blobs.path(layer.digest);
    if ((await this.#store.blobs.size(layer.digest)) !== layer.size) {
      throw Errors.conflict(`blob ${layer.digest} of this model is missing or damaged in the store; pull or create the model again`);
    }
    emit(line(0));
    if (await this.#client.hasBlob(repo, layer.digest, signal)) {
      emit(line(layer.size));
      return;
    }
    let sent = 0;
    let last = -1;
    const timer = setInterval(() => {
      if (sent !== last) emit(line((last = sent)));
    }, TICK_MS);
    try {
      await this.#client.putBlob(
        repo,
        layer.digest,
        layer.size,
        () => {
          sent = 0;
          const s = createReadStream(file, { highWaterMark: 1 << 20 });
          s.on('data', (c) => (sent += c.length));
          return s;
        },
        signal,
      );
    } finally {
      clearInterval(timer);
    }
    emit(line(layer.size));
  }
}
