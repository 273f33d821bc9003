/**
 * Operations benchmark (issue 23): what running the box costs.
 *
 * 1. Scrape cost: `GET /metrics` (with the key) under 50 concurrent clients against `GET /health`
 *    under the same load, same appliance, same run; phases alternate health/metrics for `--rounds`
 *    rounds of `--seconds` each, and p50/p99 are taken over every request of a kind. Goal: the
 *    /metrics p99 at most 2x the /health p99.
 * 2. Generation throughput with the metrics plugin on against off: two appliances (the same
 *    config but `metrics: false`), the same model, one generation at a time, alternating which goes
 *    first; tokens/s is Ollama's `eval_count / eval_duration`; the ratio is the median of the
 *    per-round ratios. Goal: on/off ≥ 0.99.
 * 3. `lia console` idle CPU: the console in a tmux terminal (120x40) against the appliance, with
 *    its default 5 s refresh; once it has drawn, its process CPU time (utime + stime of
 *    /proc/PID/stat) over one minute. Goal: < 1 % of a core.
 *
 * Run: `node --conditions=lia-source --import tsx bench/ops/run.ts [--rounds 3] [--seconds 5]
 * [--gens 8] [--tokens 128] [--idle 60]` after `npm run build` (the appliances and the console run
 * from dist/). Needs tmux.
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { request } from 'undici';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { median } from '../lib/stats.js';
import { createModel } from '../../test/helpers/models.js';

const exec = promisify(execFile);
const ROOT = new URL('../..', import.meta.url).pathname;
const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '50' },
    gens: { type: 'string', default: '8' },
    tokens: { type: 'string', default: '128' },
    idle: { type: 'string', default: '60' },
    model: { type: 'string', default: 'gguf/bench-random-135m-q4_0.gguf' },
  },
});

function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

/** `concurrency` clients each sending GET `path` back to back for `seconds`; latencies in ms. */
async function load(app: ApplianceProcess, path: string, seconds: number, concurrency: number, auth: boolean): Promise<number[]> {
  const lat: number[] = [];
  const end = performance.now() + seconds * 1000;
  const headers = auth ? { authorization: `Bearer ${app.key}` } : {};
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const res = await request(app.url + path, { dispatcher: app.dispatcher(), headers });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`${path}: HTTP ${res.statusCode}`);
        lat.push(performance.now() - t0);
      }
    }),
  );
  return lat;
}

async function scrapeCost(app: ApplianceProcess, rounds: number, seconds: number, concurrency: number) {
  // Warm both paths (JIT, connections, the first registry collection).
  await load(app, '/health', 1, concurrency, false);
  await load(app, '/metrics', 1, concurrency, true);
  const health: number[] = [];
  const metrics: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? (['health', 'metrics'] as const) : (['metrics', 'health'] as const);
    for (const kind of order) {
      if (kind === 'health') health.push(...(await load(app, '/health', seconds, concurrency, false)));
      else metrics.push(...(await load(app, '/metrics', seconds, concurrency, true)));
    }
  }
  const size = (await (await app.fetch('/metrics')).text()).length;
  return {
    health: { n: health.length, p50: quantile(health, 0.5), p99: quantile(health, 0.99) },
    metrics: { n: metrics.length, p50: quantile(metrics, 0.5), p99: quantile(metrics, 0.99), bytes: size },
  };
}

async function tokensPerSecond(app: ApplianceProcess, tokens: number): Promise<number> {
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'bench', prompt: 'Once upon a time', stream: false, options: { num_predict: tokens, seed: 42, temperature: 0 } }),
  });
  const body = (await res.json()) as { eval_count: number; eval_duration: number };
  if (res.status !== 200) throw new Error(`generate: HTTP ${res.status} ${JSON.stringify(body)}`);
  return body.eval_count / (body.eval_duration / 1e9);
}

async function throughput(on: ApplianceProcess, off: ApplianceProcess, gens: number, tokens: number) {
  await tokensPerSecond(on, tokens);
  await tokensPerSecond(off, tokens);
  const onTps: number[] = [];
  const offTps: number[] = [];
  const ratios: number[] = [];
  for (let i = 0; i < gens; i++) {
    const first = i % 2 === 0 ? on : off;
    const a = await tokensPerSecond(first, tokens);
    const b = await tokensPerSecond(first === on ? off : on, tokens);
    const [x, y] = first === on ? [a, b] : [b, a];
    onTps.push(x);
    offTps.push(y);
    ratios.push(x / y);
  }
  return { on: median(onTps), off: median(offTps), ratio: median(ratios), gens };
}

async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of the line)
}

/** Seconds the console runs after its first screen before its CPU time is counted. */
const SETTLE_SECONDS = 15;

async function consoleIdle(app: ApplianceProcess, seconds: number) {
  const socket = `lia-bench-console-${process.pid}`;
  const tmux = (...args: string[]) => exec('tmux', ['-L', socket, ...args]).then((r) => r.stdout);
  await tmux(
    'new-session',
    '-d',
    '-s',
    'c',
    '-x',
    '120',
    '-y',
    '40',
    '-c',
    ROOT,
    '-e',
    `LIA_URL=${app.url}`,
    `exec node bin/lia.js console --data-dir '${app.dataDir}' 2>/dev/null`,
  );
  try {
    const pid = Number((await tmux('display-message', '-p', '-t', 'c', '#{pane_pid}')).trim());
    for (let i = 0; i < 600; i++) {
      if ((await tmux('capture-pane', '-p', '-t', 'c')).includes('svc-certs')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    // Idle is the steady state: the first seconds after the first screen are start-up work (the
    // rest of the modules compiled, the QR code drawn, the first log read), not idling.
    await new Promise((r) => setTimeout(r, SETTLE_SECONDS * 1000));
    const hz = Number((await exec('getconf', ['CLK_TCK'])).stdout.trim());
    const t0 = performance.now();
    const c0 = await cpuTicks(pid);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const c1 = await cpuTicks(pid);
    const wall = (performance.now() - t0) / 1000;
    const rss = Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
    return { cpuSeconds: (c1 - c0) / hz, wallSeconds: wall, percentOfCore: ((c1 - c0) / hz / wall) * 100, rssMiB: rss };
  } finally {
    await tmux('kill-server').catch(() => undefined);
  }
}

const base = { plugins: { 'backend-transformers': false } };
const on = await startApplianceProcess(base);
const off = await startApplianceProcess({ plugins: { 'backend-transformers': false, metrics: false } });
try {
  await createModel(on, 'bench', values.model);
  await createModel(off, 'bench', values.model);
  const scrape = await scrapeCost(on, Number(values.rounds), Number(values.seconds), Number(values.concurrency));
  const tput = await throughput(on, off, Number(values.gens), Number(values.tokens));
  const idle = await consoleIdle(on, Number(values.idle));
  const load1 = os.loadavg()[0];
  const report = {
    machine: `${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}, load average (1 min) ${load1?.toFixed(2)} at the end`,
    scrape: { ...scrape, p99Ratio: scrape.metrics.p99 / scrape.health.p99, concurrency: Number(values.concurrency) },
    throughput: tput,
    console: idle,
  };
  console.log(JSON.stringify(report, null, 2));
} finally {
  await on.close();
  await off.close();
}
