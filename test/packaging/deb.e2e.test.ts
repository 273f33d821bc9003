/**
 * The Debian package as an operator installs it: `packaging/deb/build.sh` builds it from dist/
 * (built by `npm test`'s pretest), `dpkg -i` installs it, `lia --help` runs from PATH, `lia serve`
 * runs as the user `lia` that the package created until `/health` answers over HTTPS with the
 * installed CA, the shipped llama-server is the one the engine finds and it starts, `systemd-analyze verify` accepts every installed unit, and `dpkg --purge` leaves
 * neither files, data nor user behind.
 *
 * It changes the machine (a package, a user), so it needs root and dpkg, as CI has them; without
 * them it fails saying so, never skips.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { ROOT } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/wait.js';

const run = promisify(execFile);

if (process.getuid?.() !== 0) throw new Error('the packaging test installs a .deb and creates a user: run it as root (CI does)');
for (const tool of ['dpkg', 'dpkg-deb', 'runuser', 'systemd-analyze', 'curl']) {
  await run(tool, ['--version']).catch((err: { code?: string }) => {
    if (err.code === 'ENOENT') throw new Error(`${tool} is missing: the packaging test needs it (Debian packages dpkg, util-linux, systemd, curl)`);
  });
}
if (!existsSync(path.join(ROOT, 'dist/core/cli/main.js'))) throw new Error('dist/ is missing: run npm run build first');
// The package ships llama-server; building it here would take tens of minutes.
if (!(await cachedBinary())) throw new Error('llama-server is not built: run `lia engine build` (the package ships it; .ci/run builds it once per run)');

const out = await mkdtemp(path.join(os.tmpdir(), 'lia-deb-'));
t.teardown(async () => {
  // Never leave the package behind, even when an assertion failed half way.
  await run('dpkg', ['--purge', 'lia']).catch(() => undefined);
  await rm(out, { recursive: true, force: true });
});

/** A free TCP port on loopback. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

let deb = '';
t.test('npm run package:deb builds a package with dpkg-deb', async (t) => {
  // No compression: the test measures the package, not xz or zstd.
  const r = await run(path.join(ROOT, 'packaging/deb/build.sh'), [], {
    cwd: ROOT,
    env: { ...process.env, LIA_DEB_OUT: out, LIA_DEB_COMPRESSION: 'none' },
    maxBuffer: 1 << 24,
    timeout: 240_000,
  });
  deb = r.stdout.trim().split('\n').at(-1) ?? '';
  t.match(path.basename(deb), /^lia_\d+\.\d+\.\d+_[a-z0-9]+\.deb$/);
  const info = (await run('dpkg-deb', ['--info', deb])).stdout;
  t.match(info, /Package: lia/);
  t.notMatch(info, /Depends:.*nodejs/, 'Node is recommended, not required (Debian 12 ships Node 18)');
  const conffiles = (await run('dpkg-deb', ['--info', deb, 'conffiles'])).stdout;
  t.match(conffiles, '/etc/lia/lia.config.yaml', 'the configuration is a conffile');
});

t.test('dpkg -i installs lia on PATH, creates the user and starts nothing', async (t) => {
  await run('dpkg', ['-i', deb], { timeout: 240_000 });
  const help = await run('lia', ['--help']);
  t.match(help.stdout, /serve\s+/, 'lia --help lists serve');
  t.match(help.stdout, /console\s+/, 'and the device console');
  t.match((await run('getent', ['passwd', 'lia'])).stdout, /^lia:x:\d+:\d+:.*:\/var\/lib\/lia:/);
  t.ok(existsSync('/etc/lia/lia.config.yaml'));
  for (const unit of ['svc-proxy.service', 'lia.target', 'lia-console.service']) t.ok(existsSync(`/usr/lib/systemd/system/${unit}`), unit);
  t.ok(existsSync('/usr/share/polkit-1/rules.d/50-lia-system-api.rules'), 'the polkit rule');
  // llama-server ships built: the engine finds it, and nothing needs building on the appliance.
  const engine = await run('runuser', ['-u', 'lia', '--', 'lia', 'engine', 'build', '--check'], { env: { ...process.env, HOME: '/var/lib/lia' } });
  t.equal(engine.stdout.trim(), '/usr/lib/lia/llama-server/llama-server', 'lia engine build --check finds the shipped llama-server');
  t.match((await run('/usr/lib/lia/llama-server/llama-server', ['--version'])).stderr, /version: .*commit/, 'which starts: its libraries come with it');
  if (existsSync('/run/systemd/system')) {
    const enabled = await run('systemctl', ['is-enabled', 'lia.target']).then(
      (r) => r.stdout.trim(),
      (e: { stdout?: string }) => (e.stdout ?? '').trim(),
    );
    t.not(enabled, 'enabled', 'nothing is enabled by the package');
  }
});

t.test('lia serve runs from the package as user lia and answers /health over HTTPS', async (t) => {
  const port = await freePort();
  // The packaged configuration puts the data in /var/lib/lia, which the package made for lia.
  const child = spawn('runuser', ['-u', 'lia', '--', 'lia', 'serve', '--host', '127.0.0.1', '--port', String(port)], {
    env: { ...process.env, LIA_MDNS: 'off', LIA_LOG_LEVEL: 'warn', HOME: '/var/lib/lia' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  t.teardown(async () => {
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      // already gone
    }
    await exited;
  });
  const health = await waitFor(
    `/health of the packaged appliance (output so far: ${output})`,
    async () => {
      if (child.exitCode !== null) throw new Error(`lia serve exited ${child.exitCode}:\n${output}`);
      const r = await run('curl', ['-sS', '--cacert', '/var/lib/lia/pki/root.crt', `https://localhost:${port}/health`]).catch(() => null);
      return r?.stdout.includes('"status"') ? r.stdout : null;
    },
    { timeoutMs: 90_000, intervalMs: 300 },
  );
  t.match(health, /"status":"ok"/);
  const owner = (await run('stat', ['-c', '%U %a', '/var/lib/lia/keys/master.key'])).stdout.trim();
  t.equal(owner, 'lia 600', 'the key belongs to lia, readable by lia only');
});

t.test('systemd-analyze verify accepts every installed unit', async (t) => {
  const units = (await readdir('/usr/lib/systemd/system')).filter((f) => /^(svc-.*\.service|lia\.target|lia-console\.service)$/.test(f));
  t.equal(units.length, 8, `six services, the target and the console: ${units.join(' ')}`);
  let stderr = '';
  let code = 0;
  try {
    stderr = (await run('systemd-analyze', ['verify', '--man=no', ...units.map((u) => `/usr/lib/systemd/system/${u}`)], { timeout: 60_000 })).stderr;
  } catch (err) {
    const e = err as { code?: number; stderr?: string };
    code = typeof e.code === 'number' ? e.code : 1;
    stderr = e.stderr ?? String(err);
  }
  t.equal(code, 0, stderr);
  t.same(
    stderr.split('\n').filter((l) => /svc-|lia\.target|lia-console/.test(l)),
    [],
    'no warning names one of our units',
  );
});

t.test('dpkg --purge removes the files, the data and the user', async (t) => {
  await run('dpkg', ['--purge', 'lia'], { timeout: 120_000 });
  for (const p of ['/usr/lib/lia', '/usr/bin/lia', '/etc/lia', '/var/lib/lia', '/usr/lib/systemd/system/svc-proxy.service'])
    t.notOk(existsSync(p), `${p} is gone`);
  await t.rejects(run('getent', ['passwd', 'lia']), 'the user lia is gone');
});
