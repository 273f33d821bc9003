/**
 * Names that verify: when another host on the network answers for the appliance's `.local` name,
 * the embedded mDNS responder takes `NAME-2.local`; the TLS leaf is re-issued with that name while
 * the process keeps running, and every URL the appliance advertises (`urls` of
 * `GET /system/network`, the list the banner and the device console show) verifies with curl
 * against the appliance's CA. The appliance runs as `lia serve` binds it, on every interface, so
 * that it advertises the `.local` name and its addresses.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import multicastDns from 'multicast-dns';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

const run = promisify(execFile);
const name = `lia-clash${process.pid}`;

// Another host that holds NAME.local: it answers every question about that name.
const squatter = multicastDns({ loopback: true, reuseAddr: true });
squatter.on('query', (packet) => {
  if (packet.questions.some((q) => q.name.toLowerCase() === `${name}.local`)) {
    squatter.respond({ answers: [{ name: `${name}.local`, type: 'A', ttl: 120, data: '192.0.2.99' }] });
  }
});
t.teardown(() => new Promise<void>((r) => squatter.destroy(() => r())));

const port = await new Promise<number>((resolve, reject) => {
  const s = createServer();
  s.on('error', reject);
  s.listen(0, () => {
    const p = (s.address() as { port: number }).port;
    s.close(() => resolve(p));
  });
});
const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-clash-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
await mkdir(path.join(dataDir, 'network'), { recursive: true });
await writeFile(path.join(dataDir, 'network', 'hostname'), `${name}\n`);
const config = path.join(dataDir, 'lia.config.yaml');
await writeFile(
  config,
  'plugins:\n  model-store: false\n  gguf: false\n  backend-llama-cpp: false\n  backend-llama-server: false\n  backend-transformers: false\n  engine: false\n  api-openai: false\n  api-anthropic: false\n',
);

const child = spawn(process.execPath, ['bin/lia.js', 'serve', '--config', config, '--data-dir', dataDir, '--host', '0.0.0.0', '--port', String(port)], {
  cwd: ROOT,
  env: { ...process.env, LIA_MDNS: 'embedded', LIA_LOG_LEVEL: 'warn', LIA_LOG_FORMAT: 'json' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
child.stdout.on('data', (d: Buffer) => (output += d.toString()));
child.stderr.on('data', (d: Buffer) => (output += d.toString()));
const exited = new Promise<void>((r) => child.on('exit', () => r()));
t.teardown(async () => {
  child.kill('SIGTERM');
  await exited;
});

const caFile = path.join(dataDir, 'pki', 'root.crt');
const curl = (url: string, ...args: string[]) =>
  run('curl', ['-sS', '--cacert', caFile, ...args, url]).then(
    (r) => ({ code: 0, out: r.stdout }),
    (e: { code?: number; stderr?: string }) => ({ code: e.code ?? -1, out: e.stderr ?? '' }),
  );

interface Network {
  mdns: { hostname: string | null; state: string };
  urls: string[];
}

t.test('the mDNS rename to NAME-2 re-issues the leaf without a restart; every advertised URL verifies', async (t) => {
  await waitFor(
    'the appliance to answer /health',
    async () =>
      child.exitCode === null ? (await curl(`https://localhost:${port}/health`)).code === 0 : Promise.reject(new Error(`lia serve exited:\n${output}`)),
    { timeoutMs: 90_000, intervalMs: 300 },
  );
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const renamed = `${name}-2.local`;
  const network = await waitFor(
    `mDNS to settle on ${renamed} and the URLs to carry it`,
    async () => {
      const r = await curl(`https://localhost:${port}/system/network`, '-H', `Authorization: Bearer ${key}`);
      const body = r.code === 0 ? (JSON.parse(r.out) as Network) : null;
      return body?.mdns.hostname === renamed && body.urls.includes(`https://${renamed}:${port}`) ? body : null;
    },
    { timeoutMs: 30_000, intervalMs: 250 },
  );
  t.notOk(network.urls.includes(`https://${name}.local:${port}`), 'the name another host holds is not advertised');
  t.ok(network.urls.length >= 2, `localhost, the mDNS name and the addresses: ${network.urls.join(' ')}`);
  for (const url of network.urls) {
    const { hostname } = new URL(url);
    // A name resolves to this machine as mDNS would resolve it for a client; addresses are its own.
    const resolve = /^[\d.]+$/.test(hostname) || hostname.startsWith('[') ? [] : ['--resolve', `${hostname}:${port}:127.0.0.1`];
    const r = await curl(`${url}/health`, ...resolve);
    t.equal(r.code, 0, `curl verifies ${url} (${r.out.trim()})`);
  }
  t.equal(child.exitCode, null, 'the same process kept serving');
  t.match(output, /announcing .*-2\.local instead/, 'the log says why the name changed');
});
