/**
 * Atomic file replacement: write a temp file in the same directory (created with the final
 * mode, so the secret is never readable by others even briefly), fsync it, rename it over the
 * target, then fsync the directory so the rename survives a power cut. Readers see the old
 * file or the new one, never a torn one.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * Replaces `file` with `data` atomically.
 * @param mode file mode of the result. Defaults to 0o600.
 */
export async function writeFileAtomic(file: string, data: string | Uint8Array, mode = 0o600): Promise<void> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(tmp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.chmod(mode); // the umask may have narrowed it further than asked; set it exactly
    await handle.sync();
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
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}
