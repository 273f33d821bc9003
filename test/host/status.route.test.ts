/**
 * `GET /system/status`: exactly the interface's schema, figures that agree with the kernel's
 * (MemAvailable, statfs of the model store, uptime), the package version, and a first CPU figure
 * that is a real delta, not the average since boot.
 */
import { mkdir, mkdtemp, readFile, rm, statfs, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { StatusSampler } from '../../plugins/host-services/status/sampler.js';
import { cpuPercent, parseMeminfo, parseProcStat } from '../../plugins/host-services/status/proc.js';
import { toGiB, toTiBOrGiB } from '../../plugins/host-services/status/format.js';
import { HOST_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';

t.test('GET /system/status', async (t) => {
  const modelsDir = await mkdtemp(path.join(os.tmpdir(), 'lia-models-'));
  t.teardown(() => rm(modelsDir, { recursive: true, force: true }));
  const app = await startTestAppliance({ listen: false, plugins: { ...HOST_ONLY, 'host-services': { options: { modelsDir } } } });
  t.teardown(() => app.close());
  const res = await app.fetch('/system/status');
  t.equal(res.status, 200);
  t.equal(res.headers.get('cache-control'), 'no-store');
  const s = (await res.json()) as Record<string, any>;

  t.same(Object.keys(s).sort(), ['cpu_percent', 'disk', 'hostname', 'memory', 'uptime_seconds', 'version']);
  t.same(Object.keys(s.memory).sort(), ['total_gb', 'used_percent']);
  t.same(Object.keys(s.disk).sort(), ['models', 'total']);
  t.same(Object.keys(s.disk.models).sort(), ['free', 'total', 'used']);

  const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  t.equal(s.version, `v${pkg.version}`);
  t.match(s.version, /^v\d+\.\d+\.\d+$/);
  t.equal(s.hostname, app.hooks.extensions.get('network').hostname());
  t.ok(Number.isInteger(s.uptime_seconds) && Math.abs(s.uptime_seconds - os.uptime()) < 10, 'uptime in whole seconds');
  t.ok(s.cpu_percent >= 0 && s.cpu_percent <= 100, `cpu ${s.cpu_percent}`);

  const mem = parseMeminfo(await readFile('/proc/meminfo', 'utf8'));
  t.equal(s.memory.total_gb, Math.round((mem.totalBytes / 1024 ** 3) * 10) / 10);
  const used = ((mem.totalBytes - mem.availableBytes) / mem.totalBytes) * 100;
  t.ok(Math.abs(s.memory.used_percent - used) < 5, `used ${s.memory.used_percent}% ≈ ${used.toFixed(1)}% (MemAvailable, not counting cache)`);

  for (const k of ['total', 'used', 'free']) t.match(s.disk.models[k], /^\d+(\.\d)?G$/, `disk.models.${k}`);
  t.match(s.disk.total, /^\d+(\.\d)?[GT]$/);
  const fs = await statfs(modelsDir);
  t.equal(s.disk.models.total, toGiB(fs.blocks * fs.bsize), 'the file system of the model store');
  t.ok(Math.abs(parseFloat(s.disk.models.free) - (fs.bavail * fs.bsize) / 1024 ** 3) < 1, 'free space agrees with statfs');

  t.equal((await app.fetch('/system/status', { auth: false })).status, 401);
});

t.test('the first CPU figure is a delta between two readings, not the since-boot average', async (t) => {
  const proc = await mkdtemp(path.join(os.tmpdir(), 'lia-proc-'));
  t.teardown(() => rm(proc, { recursive: true, force: true }));
  await writeFile(path.join(proc, 'meminfo'), 'MemTotal: 16000000 kB\nMemFree: 1000000 kB\nMemAvailable: 12000000 kB\nCached: 9000000 kB\n');
  // Since boot: 90 % busy. Over the next 200 ms: only idle time passes.
  await writeFile(path.join(proc, 'stat'), 'cpu  9000 0 0 1000 0 0 0 0 0 0\ncpu0 4500 0 0 500 0 0 0 0 0 0\n');
  const sampler = new StatusSampler({ modelsDir: proc, diskPaths: [], intervalMs: 60_000, procRoot: proc });
  const started = sampler.start();
  setTimeout(() => void writeFile(path.join(proc, 'stat'), 'cpu  9000 0 0 1400 0 0 0 0 0 0\n'), 50);
  await started;
  t.teardown(() => sampler.stop());
  const s = sampler.snapshot('box', '1.2.3');
  t.equal(s.cpu_percent, 0, 'idle in the window, whatever happened since boot');
  t.equal(s.memory.used_percent, 25, 'used = total − MemAvailable (cache does not count)');
  t.equal(s.version, 'v1.2.3');
  await writeFile(path.join(proc, 'stat'), 'cpu  9300 0 100 1500 0 0 0 0 0 0\n');
  await sampler.sample();
  t.equal(sampler.snapshot('box', '1.2.3').cpu_percent, 80, '400 busy of 500 jiffies');
});

t.test('pure helpers', async (t) => {
  t.same(parseProcStat('cpu  10 2 3 80 5 0 0 0 0 0\n'), { idle: 85, total: 100 });
  t.equal(cpuPercent({ idle: 0, total: 0 }, { idle: 0, total: 0 }), 0);
  t.same(
    parseMeminfo('MemTotal: 1024 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n'),
    { totalBytes: 1024 * 1024, availableBytes: 400 * 1024 },
    'old kernels: free + buffers + cached',
  );
  t.throws(() => parseProcStat('intr 1 2 3'));
  t.equal(toGiB(0), '0G');
  t.equal(toGiB(1.5 * 1024 ** 3), '1.5G');
  t.equal(toTiBOrGiB(500 * 1024 ** 3), '500G');
  t.equal(toTiBOrGiB(1.8 * 1024 ** 4), '1.8T');
});

t.test('a model store folder that does not exist yet reports its parent file system', async (t) => {
  const base = await mkdtemp(path.join(os.tmpdir(), 'lia-nostore-'));
  t.teardown(() => rm(base, { recursive: true, force: true }));
  await mkdir(path.join(base, 'x'));
  const sampler = new StatusSampler({ modelsDir: path.join(base, 'x', 'not', 'yet'), diskPaths: ['/'], intervalMs: 60_000 });
  await sampler.sample();
  const s = sampler.snapshot('h', '0.0.1');
  t.not(s.disk.models.total, '0G');
  t.equal(sampler.lastError, null);
});
