/**
 * Benchmark for the management API (issue 7): latency of `GET /system/status` and
 * `GET /system/gpu` under 50 concurrent keep-alive clients over TLS, against `GET /health` in the
 * same run and with the same load generator (autocannon, in this process; the appliance runs as
 * its own `lia serve` process with every default plugin). The GPU monitor samples a replayed
 * eight-GPU nvidia-smi in the background the whole time, so the figures include the sampler's
 * cost. Goal: p99 of both within 2x of `/health`'s. `GET /api/version` (authenticated, trivial) is
 * measured too, to show how much of the gap is the Bearer check rather than the handlers.
 *
 * Usage: node --conditions=lia-source --import tsx bench/system/status.ts [--duration 10] [--connections 50]
 *
 * @module
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon, { type Result } from 'autocannon';
import { startApplianceProcess } from '../lib/appliance-process.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '50' } } });
const duration = Number(values.duration);
const connections = Number(values.connections);

interface Figures {
  p50: number;
  p99: number;
  rps: number;
}

async function load(url: string, headers: Record<string, string>, ca: string, seconds = duration): Promise<Figures> {
  const r: Result = await autocannon({ url, connections, duration: seconds, headers, tlsOptions: { ca } });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
  return { p50: r.latency.p50, p99: r.latency.p99, rps: Math.round(r.requests.average) };
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-bench-system-'));
const fakeSmi = path.join(dir, 'nvidia-smi');
await writeFile(fakeSmi, `#!/bin/sh\ncat '${path.join(ROOT, 'test/fixtures/host/nvidia/8x-titan-x.csv')}'\n`);
await chmod(fakeSmi, 0o755);
const app = await startApplianceProcess({}, { LIA_NVIDIA_SMI: fakeSmi, LIA_MDNS: 'off' });
try {
  const { ca } = app;
  const auth = { authorization: `Bearer ${app.key}` };
  const base = app.url;
  await load(`${base}/health`, {}, ca, 3); // warm-up: JIT, TLS session setup
  await load(`${base}/system/status`, auth, ca, 2);
  await load(`${base}/system/gpu`, auth, ca, 2);
  const health1 = await load(`${base}/health`, {}, ca);
  const status = await load(`${base}/system/status`, auth, ca);
  const gpu = await load(`${base}/system/gpu`, auth, ca);
  // An authenticated route that does nothing (Ollama's /api/version): separates the cost of the
  // Bearer check, which /health skips, from the cost of the handlers measured here.
  const authed = await load(`${base}/api/version`, auth, ca);
  const health2 = await load(`${base}/health`, {}, ca);
  const health = { p50: (health1.p50 + health2.p50) / 2, p99: (health1.p99 + health2.p99) / 2, rps: Math.round((health1.rps + health2.rps) / 2) };
  const ratio = (f: Figures) => +(f.p99 / Math.max(health.p99, 1)).toFixed(2);
  console.log(
    JSON.stringify(
      {
        machine: `${os.cpus().length} cores, ${os.cpus()[0]?.model}`,
        connections,
        durationSeconds: duration,
        unit: 'milliseconds',
        health: { ...health, runs: [health1, health2] },
        authenticatedApiVersion: { ...authed, p99VsHealth: ratio(authed) },
        systemStatus: { ...status, p99VsHealth: ratio(status) },
        systemGpu: { ...gpu, p99VsHealth: ratio(gpu) },
        goal: 'p99 within 2x of /health',
        met: ratio(status) <= 2 && ratio(gpu) <= 2,
      },
      null,
      2,
    ),
  );
} finally {
  await app.close();
  await rm(dir, { recursive: true, force: true });
}
