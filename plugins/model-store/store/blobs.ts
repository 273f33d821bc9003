/**
 * The content-addressed blob files. A blob becomes visible under its final name only after its
 * SHA-256 was checked, so a reader never sees a partial or corrupt file. Digests that an
 * operation is still building a manifest from are pinned, so a concurrent delete does not
 * collect them.
 *
 * @module
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Errors } from 'lia/plugin';
import { storageError } from './errors.js';
import type { StorePaths } from './paths.js';

/** The result of storing bytes as a blob. */
export interface StoredBlob {
  digest: string;
  size: number;
  /** False when the blob was already there. */
  created: boolean;
}

/** The `blobs/` folder of a store. */
export class BlobStore {
  readonly #paths: StorePaths;
  readonly #pins = new Map<string, number>();

  constructor(paths: StorePaths) {
    this.#paths = paths;
  }

  /** The file of a digest. */
  path(digest: string): string {
    return this.#paths.blob(digest);
  }

  /** The size of a stored blob, or null when it is absent. */
  async size(digest: string): Promise<number | null> {
    try {
      const s = await stat(this.path(digest));
      return s.isFile() ? s.size : null;
    } catch {
      return null;
    }
  }

  /** A temp file name in the blob folder (same file system, so the final rename is atomic). */
  tempPath(): string {
    return path.join(this.#paths.blobs, `.upload-${randomBytes(8).toString('hex')}.tmp`);
  }

  /**
   * Streams bytes into the store. With `expected`, a different digest is a 400 and nothing is
   * kept; without, the digest is whatever the bytes hash to.
   */
  async ingest(source: Readable, expected?: string): Promise<StoredBlob> {
    await mkdir(this.#paths.blobs, { recursive: true });
    const tmp = this.tempPath();
    const hash = createHash('sha256');
    let size = 0;
    try {
      await pipeline(
        source,
        async function* (chunks: AsyncIterable<Buffer>) {
          for await (const chunk of chunks) {
            hash.update(chunk);
            size += chunk.length;
            yield chunk;
          }
        },
        createWriteStream(tmp, { flags: 'wx' }),
      );
    } catch (err) {
      await rm(tmp, { force: true });
      throw storageError(err, 'storing a blob');
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (expected && expected !== digest) {
      await rm(tmp, { force: true });
      throw Errors.badRequest(`digest mismatch, expected "${expected}", got "${digest}"`);
    }
    return this.#commit(tmp, digest, size);
  }

  /** Stores small bytes (a template, the params, a config) and returns the blob. */
  async put(bytes: Buffer | string): Promise<StoredBlob> {
    const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes);
    const digest = `sha256:${createHash('sha256').update(buf).digest('hex')}`;
    if ((await this.size(digest)) === buf.length) return { digest, size: buf.length, created: false };
    await mkdir(this.#paths.blobs, { recursive: true });
    const tmp = this.tempPath();
    try {
      await writeFile(tmp, buf, { flag: 'wx' });
    } catch (err) {
      await rm(tmp, { force: true });
      throw storageError(err, 'storing a blob');
    }
    return this.#commit(tmp, digest, buf.length);
  }

  /** Moves a verified temp file to its final name. */
  async #commit(tmp: string, digest: string, size: number): Promise<StoredBlob> {
    if ((await this.size(digest)) === size) {
      await rm(tmp, { force: true });
      return { digest, size, created: false };
    }
    await rename(tmp, this.path(digest));
    return { digest, size, created: true };
  }

  /** Keeps digests from garbage collection until the returned function is called. */
  pin(digests: Iterable<string>): () => void {
    const list = [...digests];
    for (const d of list) this.#pins.set(d, (this.#pins.get(d) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const d of list) {
        const n = (this.#pins.get(d) ?? 1) - 1;
        if (n <= 0) this.#pins.delete(d);
        else this.#pins.set(d, n);
      }
    };
  }

  isPinned(digest: string): boolean {
    return this.#pins.has(digest);
  }

  /** Deletes a blob (no error when it is already gone). */
  async remove(digest: string): Promise<void> {
    await rm(this.path(digest), { force: true });
  }

  /** Removes leftover temp files of interrupted uploads (not resumable downloads). */
  async pruneTemp(): Promise<void> {
    const names = await readdir(this.#paths.blobs).catch(() => [] as string[]);
    await Promise.all(names.filter((n) => n.startsWith('.upload-') && n.endsWith('.tmp')).map((n) => rm(path.join(this.#paths.blobs, n), { force: true })));
  }
}
