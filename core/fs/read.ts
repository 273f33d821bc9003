/**
 * Reading optional files: kernel and cgroup files (`/proc`, `/sys/fs/cgroup`) that exist on some
 * hosts and not on others.
 *
 * @module
 */
import { readFileSync } from 'node:fs';

/** The text of `file`, or null when it cannot be read (absent, not permitted, not a file). */
export function readTextOrNull(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}
