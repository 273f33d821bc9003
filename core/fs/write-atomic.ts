/**
 * Atomic file replacement: write a temp file in the same directory (created with the final
 * mode, so a secret is never readable by others even briefly), rename it over the target.
 * Readers see the old file or the new one, never a torn one. Durable by default: the temp file is
 * fsynced before the rename and the directory after it, so the rename survives a power cut.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fchmodSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/** How {@link writeFileAtomic} writes. */
export interface AtomicWriteOptions {
  /** File mode of the result. Defaults to 0o600. */
  mode?: number;
  /**
   * fsync the file before the rename and the directory after it. Defaults to true. Pass false
   * where the caller makes the file durable itself, later (see {@link flushToDisk}); the write
   * is then a few system calls, made synchronously (cheaper than as many thread-pool round
   * trips), so keep it to small files.
   */
  durable?: boolean;
}

/** Replaces `file` with `data` atomically (see {@link AtomicWriteOptions} for the defaults). */
export async function writeFileAtomic(file: string, data: string | Uint8Array, options: AtomicWriteOptions = {}): Promise<void> {
  const { mode = 0o600, durable = true } = options;
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  if (!durable) return writeQuickly(file, tmp, data, mode);
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode); // the umask may have narrowed it further than asked; set it exactly
    if (durable) await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  try {
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (durable) await syncDirectory(dir);
}

/** The non-durable write: the same steps, synchronous, without the fsyncs. */
function writeQuickly(file: string, tmp: string, data: string | Uint8Array, mode: number): void {
  try {
    const fd = openSync(tmp, 'wx', mode);
    try {
      writeFileSync(fd, data);
      fchmodSync(fd, mode);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * Makes files written earlier durable: each file's data is flushed (`fdatasync`), then each of
 * their directories (so their names are too). Files that are gone by then are skipped; other
 * failures reject after every file was tried.
 */
export async function flushToDisk(files: readonly string[]): Promise<void> {
  const failures: unknown[] = [];
  const tryEach = async (paths: Iterable<string>, flush: (p: string) => Promise<void>): Promise<void> => {
    for (const p of paths) {
      await flush(p).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') failures.push(err);
      });
    }
  };
  await tryEach(files, async (f) => {
    const handle = await open(f, 'r');
    try {
      await handle.datasync();
    } finally {
      await handle.close();
    }
  });
  await tryEach(new Set(files.map((f) => path.dirname(f))), syncDirectory);
  if (failures.length > 0) throw failures[0];
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
