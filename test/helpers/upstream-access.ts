/**
 * An appliance as another appliance's upstream: its master key and root CA written to files (as
 * an operator would, since `backend-upstream` never takes a key in the config), removed when the
 * test ends.
 *
 * @module
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';

/** The `key_file` and `ca_file` of an upstream entry that reaches `app`. */
export async function upstreamAccess(t: Test, app: { key: string; ca: string }): Promise<{ key_file: string; ca_file: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-upstream-access-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const access = { key_file: path.join(dir, 'upstream.key'), ca_file: path.join(dir, 'upstream.pem') };
  await writeFile(access.key_file, app.key + '\n');
  await writeFile(access.ca_file, app.ca);
  return access;
}
