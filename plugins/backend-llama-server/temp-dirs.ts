/**
 * The private temporary folders of this plugin's servers (slot snapshots, the probe's model, the
 * servers' sockets), each
 * named after the appliance process that made it (`lia-slots-<pid>-XXXXXX`), so that the folders
 * an appliance left when it died (a SIGKILL leaves no time to remove them) are removed at the next
 * start: {@link sweepStaleDirs} removes every such folder whose process is gone.
 *
 * @module
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const NAME = /^lia-(?:slots|probe|sockets)-(\d+)-/;

/** A new private folder (0700) for `kind`, in the system's temporary folder. */
export function privateDir(kind: 'slots' | 'probe' | 'sockets'): Promise<string> {
  return mkdtemp(path.join(os.tmpdir(), `lia-${kind}-${process.pid}-`));
}

/** Whether process `pid` is running (one of another user's counts: EPERM). */
export function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Removes the folders of {@link privateDir} whose process has ended; resolves with how many. */
export async function sweepStaleDirs(dir: string = os.tmpdir()): Promise<number> {
  const names = await readdir(dir).catch(() => [] as string[]);
  let removed = 0;
  for (const name of names) {
    const pid = Number(NAME.exec(name)?.[1] ?? 0);
    if (!pid || pid === process.pid || alive(pid)) continue;
    await rm(path.join(dir, name), { recursive: true, force: true }).then(
      () => removed++,
      () => undefined,
    );
  }
  return removed;
}
