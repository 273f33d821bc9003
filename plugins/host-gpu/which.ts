/**
 * Finds an executable the way a shell would: a name with a slash is taken as a path, a bare
 * name is looked up in `PATH`. Used by the GPU providers' `detect()`.
 *
 * @module
 */
import { access, constants } from 'node:fs/promises';
import path from 'node:path';

/** The absolute path of `command` if it is an executable file, else null. */
export async function which(command: string, envPath = process.env['PATH'] ?? ''): Promise<string | null> {
  const candidates = command.includes('/')
    ? [path.resolve(command)]
    : envPath.split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, command));
  for (const file of candidates) {
    try {
      await access(file, constants.X_OK);
      return file;
    } catch {
      // next
    }
  }
  return null;
}
