/**
 * `lia console` in a real terminal: tmux runs `node bin/lia.js console` against a test
 * appliance; the test reads the screen with `capture-pane` and types with `send-keys`, as an
 * operator at the device would. It waits for what the screen shows (never for a time).
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import t from 'tap';
import { groupFingerprint } from '../../plugins/console/format.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

const exec = promisify(execFile);
const tmuxFound = await exec('tmux', ['-V']).then(
  () => true,
  () => false,
);
if (!tmuxFound) throw new Error('tmux is missing: install it (Debian package "tmux", listed in .ci/run)');

const app = await startTestAppliance();
t.teardown(() => app.close());

// A server of our own (-L), so the test never touches an operator's tmux sessions.
const socket = `lia-console-test-${process.pid}`;
const tmux = (...args: string[]): Promise<string> => exec('tmux', ['-L', socket, ...args]).then((r) => r.stdout);
t.teardown(() => tmux('kill-server').catch(() => undefined));

const screen = (): Promise<string> => tmux('capture-pane', '-p', '-t', 'console');
async function waitScreen(what: string, test: (text: string) => boolean): Promise<string> {
  let last = '';
  try {
    return await waitFor(
      what,
      async () => {
        last = await screen();
        return test(last) && last;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- screen ---\n${last}`);
  }
}

const command = `env -u LIA_API_KEY node bin/lia.js console --data-dir '${app.dataDir}' --interval 1; echo "console exited: $?"; sleep 600`;
await tmux('new-session', '-d', '-s', 'console', '-x', '120', '-y', '40', '-c', ROOT, '-e', `LIA_URL=${app.url}`, command);

t.test('the screen shows the URLs, the CA fingerprint in groups, the six services and a QR code', async (t) => {
  const fp = groupFingerprint(new X509Certificate(app.ca).fingerprint256);
  const text = await waitScreen(
    'the fingerprint, six active services and the QR code',
    (s) => fp.every((l) => s.includes(l)) && (s.match(/svc-[a-z-]+\s+active/g) ?? []).length === 6 && /[▀▄█]{7}/.test(s),
  );
  t.match(text, app.url, 'the URL the appliance answers on');
  t.match(text, 'Scan to download the CA');
  t.match(text, /[▀▄█]{7}/, 'the QR code is drawn');
  t.match(text, /Loaded models[^\n]*\n\s+none/);
  t.match(text, /CPU [\d.]+%\s+Memory/);
});

t.test('k shows the key file, r then y rotates the key and shows the new one once', async (t) => {
  await tmux('send-keys', '-t', 'console', 'k');
  await waitScreen('the key file path', (s) => s.includes(`${app.dataDir}/keys/master.key`));
  await tmux('send-keys', '-t', 'console', 'r');
  await waitScreen('the confirmation', (s) => s.includes('Rotate the master key?'));
  await tmux('send-keys', '-t', 'console', 'y');
  const text = await waitScreen('the new key', (s) => s.includes('New master key'));
  const onDisk = (await readFile(`${app.dataDir}/keys/master.key`, 'utf8')).trim();
  t.not(onDisk, app.key, 'the key file holds a new key');
  t.ok(text.includes(onDisk), 'the screen shows that new key');
  t.equal((await app.fetch('/system/status')).status, 401, 'the old key no longer works');
  // Any key hides it; the screen keeps refreshing with the new key.
  await tmux('send-keys', '-t', 'console', 'x');
  await waitScreen('the key gone and the services still read', (s) => !s.includes(onDisk) && (s.match(/svc-[a-z-]+\s+active/g) ?? []).length === 6);
});

t.test('s then a number restarts that service; h renames the host', async (t) => {
  await tmux('send-keys', '-t', 'console', 's');
  await waitScreen('the service menu', (s) => s.includes('Restart which service?'));
  await tmux('send-keys', '-t', 'console', '2');
  const restarted = await waitScreen('the restart result', (s) => /svc-[a-z-]+: restarted, now active/.test(s));
  t.match(restarted, 'restarted, now active');
  await tmux('send-keys', '-t', 'console', 'h');
  await waitScreen('the host name prompt', (s) => s.includes('New host name'));
  await tmux('send-keys', '-t', 'console', '-l', 'console-box');
  await tmux('send-keys', '-t', 'console', 'Enter');
  const renamed = await waitScreen('the new host name', (s) => s.includes('Host name is now console-box'));
  t.match(renamed, 'the certificate covers it');
  await waitScreen('the header refreshed', (s) => s.includes('Host name: console-box'));
});

t.test('the screen redraws for a narrower terminal and back; q quits', async (t) => {
  await tmux('resize-window', '-t', 'console', '-x', '90', '-y', '40');
  const narrow = await waitScreen('the narrow layout', (s) => s.includes('widen the terminal to 110 columns'));
  t.notMatch(narrow, 'Scan to download the CA', 'no QR code beside the rest at 90 columns');
  t.ok(
    narrow.split('\n').every((l) => l.length <= 90),
    'nothing wider than the terminal',
  );
  await tmux('resize-window', '-t', 'console', '-x', '120', '-y', '40');
  await waitScreen('the QR code again', (s) => s.includes('Scan to download the CA'));
  await tmux('send-keys', '-t', 'console', 'q');
  const after = await waitScreen('the console to exit', (s) => s.includes('console exited:'));
  t.match(after, 'console exited: 0');
});
