/**
 * The appliance's host name. In the embedded default it is the appliance's own name (what mDNS
 * advertises and the certificate carries), kept in `<dataDir>/network/hostname`; it starts as the
 * machine's name. Under systemd the machine's name itself is changed with `hostnamectl`.
 *
 * @module
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { defineError, Errors } from 'lia/plugin';
import { firstLine, runTool } from 'lia/utils';

/** The system refused or failed to change its host name. */
export const hostnameFailed = defineError('LIA_ERR_HOSTNAME_FAILED', 502, 'The system failed to change its host name.');

/** One DNS label (RFC 1123), lower case. */
export const HOSTNAME_LABEL = /^(?=.{1,63}$)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/** A usable label from any machine name: first label, lower case, other characters as hyphens. */
export function sanitizeHostname(raw: string): string {
  const label = raw
    .split('.')[0]!
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return HOSTNAME_LABEL.test(label) ? label : 'lia';
}

/** Reads the persisted name, else the machine's. */
export async function loadHostname(dataDir: string): Promise<string> {
  try {
    const saved = (await readFile(path.join(dataDir, 'network', 'hostname'), 'utf8')).trim();
    if (HOSTNAME_LABEL.test(saved)) return saved;
  } catch {
    // first start
  }
  return sanitizeHostname(os.hostname());
}

/** Persists the name atomically. */
export async function saveHostname(dataDir: string, name: string): Promise<void> {
  const dir = path.join(dataDir, 'network');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = path.join(dir, `hostname.${process.pid}.tmp`);
  await writeFile(tmp, name + '\n', { mode: 0o644 });
  await rename(tmp, path.join(dir, 'hostname'));
}

/** `hostnamectl hostname NAME` (systemd ≥ 249), falling back to the older `set-hostname` verb. */
export async function setSystemHostname(hostnamectl: string, name: string, timeoutMs: number): Promise<void> {
  let r = await runTool(hostnamectl, ['hostname', name], { timeoutMs }).catch((err: Error) => {
    throw hostnameFailed(`hostnamectl could not run: ${err.message}`);
  });
  if (r.code !== 0 && /unknown (command )?verb/i.test(r.stderr)) {
    r = await runTool(hostnamectl, ['set-hostname', name], { timeoutMs });
  }
  if (r.code !== 0) {
    const said = firstLine(r.stderr) || `exit ${r.code}`;
    if (/access denied|interactive authentication required|not authorized/i.test(said)) {
      throw Errors.forbidden(`the system refused the new host name: ${said} (is the polkit rule from systemd/ installed?)`);
    }
    throw hostnameFailed(`hostnamectl failed: ${said}`);
  }
}
