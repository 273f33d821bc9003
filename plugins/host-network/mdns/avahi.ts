/**
 * Publishing through avahi, the system's mDNS responder: a static service file
 * (avahi.service(5)) in `/etc/avahi/services`, which avahi picks up by itself. avahi owns the host
 * name (it takes the system's at start and adds `-2` on a conflict), so the name actually in use
 * is asked of avahi over D-Bus (`GetHostNameFqdn`). A rename goes through `avahi-set-host-name`,
 * since avahi does not follow `hostnamectl`.
 *
 * @module
 */
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { firstLine, runTool } from 'lia/utils';

/** Where avahi keeps its files and which tools talk to it. */
export interface AvahiOptions {
  servicesDir: string;
  pidFile: string;
  busctl: string;
  setHostName: string;
  timeoutMs: number;
}

/** The service file's XML; `%h` lets avahi put its own host name in the instance name. */
export function serviceFileXml(instanceTemplate: string, port: number, txt: string[]): string {
  const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return [
    '<?xml version="1.0" standalone="no"?>',
    '<!DOCTYPE service-group SYSTEM "avahi-service.dtd">',
    '<!-- Written by LIA (plugin host-network); removed when the appliance stops. -->',
    '<service-group>',
    `  <name replace-wildcards="yes">${esc(instanceTemplate)}</name>`,
    '  <service>',
    '    <type>_https._tcp</type>',
    `    <port>${port}</port>`,
    ...txt.map((t) => `    <txt-record>${esc(t)}</txt-record>`),
    '  </service>',
    '</service-group>',
    '',
  ].join('\n');
}

/** True when an avahi-daemon is running (its pid file names a live process). */
export async function avahiRunning(pidFile: string): Promise<boolean> {
  try {
    const pid = Number((await readFile(pidFile, 'utf8')).trim());
    if (!Number.isInteger(pid) || pid <= 0) return false;
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Publishes the appliance through a running avahi-daemon. */
export class AvahiAdvertiser {
  readonly #o: AvahiOptions;
  #file: string | null = null;
  #hostname: string | null = null;

  constructor(options: AvahiOptions) {
    this.#o = options;
  }

  get hostname(): string | null {
    return this.#hostname;
  }

  /** Writes the service file (only when its content changed) and reads avahi's host name. */
  async publish(instanceTemplate: string, port: number, txt: string[]): Promise<void> {
    const file = path.join(this.#o.servicesDir, 'lia.service');
    const xml = serviceFileXml(instanceTemplate, port, txt);
    const current = await readFile(file, 'utf8').catch(() => null);
    if (current !== xml) await writeFile(file, xml, { mode: 0o644 });
    this.#file = file;
    await this.refreshName();
  }

  /** Asks avahi for the `.local` name it uses; keeps the previous answer when D-Bus is unreachable. */
  async refreshName(): Promise<void> {
    try {
      const r = await runTool(this.#o.busctl, ['--system', 'call', 'org.freedesktop.Avahi', '/', 'org.freedesktop.Avahi.Server', 'GetHostNameFqdn'], {
        timeoutMs: this.#o.timeoutMs,
      });
      const m = /^s "(.*)"$/.exec(r.stdout.trim());
      if (r.code === 0 && m?.[1]) this.#hostname = m[1];
    } catch {
      // busctl missing or hung: keep what we had
    }
  }

  /** Renames avahi's host; throws with avahi's message when it refuses (D-Bus policy). */
  async setHostName(name: string): Promise<void> {
    const r = await runTool(this.#o.setHostName, [name], { timeoutMs: this.#o.timeoutMs });
    if (r.code !== 0) throw new Error(`avahi-set-host-name failed: ${firstLine(r.stderr) || `exit ${r.code}`}`);
    await this.refreshName();
  }

  async unpublish(): Promise<void> {
    if (this.#file) await rm(this.#file, { force: true });
    this.#file = null;
  }
}
