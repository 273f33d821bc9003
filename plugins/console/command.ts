/**
 * `lia console`: the device console, a full-screen text interface for the appliance's own screen
 * (the first virtual terminal under systemd, `systemd/lia-console.service`) or any terminal. It
 * is a client of the local appliance's HTTPS API, like every other command: it trusts the CA of
 * the data directory and sends the master key from the key file (or `LIA_API_KEY`). The CA
 * fingerprint it shows is computed from that same local CA file, never from what the network
 * serves, so it is the value to compare a downloaded certificate with.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { CliError, type ApiClient, type CliCommand, type CliIO } from 'lia/plugin';
import { responseError } from 'lia/utils';
import { readSnapshot, type Snapshot } from './snapshot.js';
import type { ConsoleActions } from './view.js';

/** The service logs (for the warnings) are read every this many refreshes. */
const LOG_EVERY = 3;

/** Seconds between refreshes when `--interval` is not given. */
export const DEFAULT_INTERVAL_SECONDS = 5;

/** SHA-256 fingerprint of the data directory's root CA, or null when it cannot be read. */
async function localFingerprint(dataDir: string): Promise<string | null> {
  try {
    return new X509Certificate(await readFile(path.join(dataDir, 'pki', 'root.crt'))).fingerprint256;
  } catch {
    return null;
  }
}

/** The actions of the screen, through the API. `client` is replaced after a key rotation. */
function apiActions(holder: { client: ApiClient }, io: CliIO): ConsoleActions {
  return {
    async rotateKey() {
      const body = await holder.client.json<{ key: string }>('POST', '/system/api-keys/rotate');
      // The old key no longer works: later requests use the new one (from the key file, or from
      // the environment when the key came from there).
      if (io.env['LIA_API_KEY']) io.env['LIA_API_KEY'] = body.key;
      holder.client = await io.client();
      return body.key;
    },
    async restartService(name) {
      const res = await holder.client.request('POST', `/system/services/${encodeURIComponent(name)}/`, { action: 'restart' });
      if (!res.ok) throw await responseError(res);
      const body = (await res.json()) as { status: string; state?: { state: string } };
      return res.status === 202
        ? `${name}: restart accepted (it restarts once this answer is out)`
        : `${name}: restarted, now ${body.state?.state ?? body.status}`;
    },
    async setHostname(name) {
      const body = await holder.client.json<{
        hostname: string;
        mdns: { hostname: string | null };
        certificate: { reissued: boolean; covers_hostname: boolean };
      }>('POST', '/system/network/hostname', { hostname: name });
      const cert = body.certificate.covers_hostname ? 'the certificate covers it' : 'the certificate does NOT cover it yet';
      return `Host name is now ${body.hostname} (mDNS: ${body.mdns.hostname ?? 'off'}); ${cert}`;
    },
  };
}

export const consoleCommand: CliCommand = {
  name: 'console',
  summary: 'Full-screen device console: URLs, CA fingerprint, services, models, resources, warnings',
  usage: 'lia console [--interval SECONDS] [--data-dir DIR] [--url https://localhost:8443]',
  options: { interval: { type: 'string' } },
  async run(args, io) {
    const stdout = io.stdout as NodeJS.WriteStream;
    if (!stdout.isTTY || !io.stdin.isTTY) throw new CliError('the console needs a terminal (stdin and stdout a TTY); use "lia status" in scripts', 2);
    const interval = args.values['interval'] === undefined ? DEFAULT_INTERVAL_SECONDS : Number(args.values['interval']);
    if (!Number.isFinite(interval) || interval < 1 || interval > 3600) throw new CliError('--interval must be a number of seconds from 1 to 3600', 2);

    // React's production build: the development one checks and allocates far more on every
    // render, which a console that redraws every few seconds all day pays for in CPU and GC.
    process.env['NODE_ENV'] ??= 'production';
    // Ink draws only the last frame when it believes it runs under CI (a CI or CI_* variable in the
    // environment). This command has just checked that it owns a terminal, so a CI variable
    // inherited from a build or provisioning shell must not blank the device's screen.
    process.env['CI'] = 'false';
    const [{ createElement }, { render }, QR, { ConsoleApp }] = await Promise.all([import('react'), import('ink'), import('qrcode'), import('./view.js')]);
    const holder = { client: await io.client() };
    let round = 0;
    let warnings: Snapshot['warnings'] = [];
    const fingerprint = await localFingerprint(io.dataDir);
    // The alternate screen: the console owns the whole terminal and leaves it as it found it.
    stdout.write('\x1b[?1049h\x1b[H');
    try {
      const app = render(
        createElement(ConsoleApp, {
          load: () =>
            readSnapshot(holder.client, round++ % LOG_EVERY === 0).then((snap) => {
              // Warnings are read every LOG_EVERY rounds; the rounds between show the last ones.
              if (snap.logsRead) warnings = snap.warnings;
              return { ...snap, warnings };
            }),
          actions: apiActions(holder, io),
          fingerprint,
          keyFile: path.join(io.dataDir, 'keys', 'master.key'),
          qr: (url: string) => QR.default.toString(url, { type: 'utf8', margin: 2, errorCorrectionLevel: 'L' }),
          intervalMs: interval * 1000,
        }),
        { stdout, stdin: io.stdin as NodeJS.ReadStream, exitOnCtrlC: true, patchConsole: false },
      );
      await app.waitUntilExit();
    } finally {
      stdout.write('\x1b[?1049l');
    }
    return 0;
  },
};
