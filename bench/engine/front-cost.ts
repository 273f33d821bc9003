/**
 * What a front end in front of llama-server costs the first token, whatever it does: the same
 * streamed generation (same model, prompt, sampling, cached prompt) asked of
 *
 * - llama-server directly (plain HTTP, a new connection each time: it closes one after every
 *   streamed answer);
 * - nginx forwarding to it (plain HTTP, `proxy_buffering off`): a native front end;
 * - forwarder.ts forwarding to it: the least a Node.js front end does (no TLS, key or parsing);
 * - the appliance (HTTPS, a key, `/api/generate`, which schedules, places the slot and translates).
 *
 * They take turns, so that all see the same machine: every other request is the appliance's (it
 * runs its own llama-server), the other three rotate in between. Prints
 * each median, its ratio llama-server ÷ front end (≥ 1: the front end costs nothing) and its spread
 * (interquartile range over median). The gap between the Node.js forwarder and llama-server is
 * what any front end written in Node.js pays on this machine before it does any work of its own.
 *
 * Needs nginx (`apt-get install nginx-light`); fails at once without it.
 *
 * Run: `node --import tsx bench/engine/front-cost.ts [--model 135m|1b-q4_0] [--rounds 80] [--tokens 16]`.
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median, spread } from '../lib/stats.js';
import { benchModelPath, modelLabel } from '../models/models.js';
import { PROMPT } from './figures.js';
import { startSideBySide } from './side-by-side.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '135m' },
    rounds: { type: 'string', default: '80' },
    tokens: { type: 'string', default: '16' },
    slots: { type: 'string', default: '16' },
    context: { type: 'string', default: '1024' },
  },
});
const ROUNDS = Number(values.rounds);
const TOKENS = Number(values.tokens);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const FORWARDER = fileURLToPath(new URL('./forwarder.ts', import.meta.url));

/** Starts a child and resolves once it prints its first line (`ready`), or rejects when it exits first. */
function started(child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`${child.spawnfile} exited (${code}) before it was ready`)));
  });
}

/** nginx on `port` forwarding everything to `upstream` unbuffered, one worker, in a folder of its own. */
async function startNginx(dir: string, port: number, upstream: number): Promise<ChildProcess> {
  const conf = path.join(dir, 'nginx.conf');
  await writeFile(
    conf,
    `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path ${dir};
  proxy_temp_path ${dir};
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://127.0.0.1:${upstream};
      proxy_http_version 1.1;
      proxy_buffering off;
      proxy_request_buffering off;
      tcp_nodelay on;
    }
  }
}
`,
  );
  const child = spawn(NGINX!, ['-p', dir, '-c', conf], { stdio: ['ignore', 'ignore', 'inherit'] });
  // nginx prints nothing once it listens: ask until it answers.
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}); see ${dir}/error.log`);
    const ok = await fetch(`http://127.0.0.1:${port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return child;
    if (i > 100) throw new Error('nginx did not answer within 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  if (!NGINX) throw new Error('nginx is not installed (apt-get install nginx-light): this benchmark compares the appliance with a native front end');
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await benchModelPath(values.model);
  const both = await startSideBySide({ model, port: await freePort(), slots: SLOTS, context: CONTEXT, engine: 'llama-server' });
  const { app, port, threads, batchThreads } = both;
  const [nginxPort, forwarderPort] = [await freePort(), await freePort()];
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-front-'));
  const children: ChildProcess[] = [];
  try {
    children.push(await startNginx(dir, nginxPort, port));
    const forwarder = spawn(process.execPath, ['--import', 'tsx', FORWARDER, String(forwarderPort), String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(forwarder);
    await started(forwarder);
    const agent = app.dispatcher();
    const plain = (p: number) => {
      const origin = `http://127.0.0.1:${p}`;
      const pool = keepAlivePool(origin);
      return () => llamaServerGenerate(origin, pool, PROMPT, TOKENS);
    };
    const fronts = {
      'llama-server': plain(port),
      nginx: plain(nginxPort),
      'node forwarder': plain(forwarderPort),
      appliance: () => applianceGenerate(app, agent, 'bench', PROMPT, TOKENS),
    };
    const names = Object.keys(fronts) as Array<keyof typeof fronts>;
    for (let i = 0; i < 5; i++) for (const name of names) await fronts[name]();
    await both.check();
    // The appliance runs its own llama-server; the other three share the benchmark's. A request to
    // one server always follows one to the other, so that neither finds its weights warmer in the
    // processor's caches than the other does.
    const ttft = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<keyof typeof fronts, number[]>;
    const others = names.filter((n) => n !== 'appliance');
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < others.length; k++) {
        const name = others[(round + k) % others.length]!;
        ttft[name].push((await fronts[name]()).ttftMs);
        ttft.appliance.push((await fronts.appliance()).ttftMs);
      }
    }
    const direct = median(ttft['llama-server']);
    const figures = Object.fromEntries(names.map((n) => [n, { firstTokenMs: median(ttft[n]), ratio: direct / median(ttft[n]), spread: spread(ttft[n]) }]));
    for (const [name, f] of Object.entries(figures)) {
      console.log(`${name.padEnd(15)} ${f.firstTokenMs.toFixed(2)} ms  ratio ${f.ratio.toFixed(3)}  spread ${(f.spread * 100).toFixed(0)} %`);
    }
    console.log(
      await saveResult('front-cost', {
        machine,
        model: modelLabel(values.model),
        threads,
        batchThreads,
        slots: SLOTS,
        context: CONTEXT,
        rounds: ROUNDS,
        figures,
        samples: ttft,
      }),
    );
  } finally {
    for (const c of children) c.kill();
    await both.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
