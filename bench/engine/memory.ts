/**
 * Memory and load time against llama-server, on one model (default `1b-q4_0`, see
 * bench/models/models.ts):
 *
 * - **Idle**: resident memory of the appliance as it starts with its default plugins, once quiet
 *   (the API process and the spare runner it keeps), summed over its process tree. Both RSS
 *   (which counts shared library pages in every process) and PSS (which splits them) are shown.
 * - **Loaded**: one model loaded with 1 slot × 2,048 context and with 4 slots × 2,048 (8,192 KV
 *   cells; the model's trained context is 2,048, which the appliance does not exceed), after one
 *   short generation: the runner alone, and the whole appliance; llama-server with `-np` slots and
 *   `-c` the same total. Anonymous and file-backed (the mapped weights) memory apart.
 * - **Load time**: from a request for a model that is not loaded to its first token (the appliance,
 *   with its spare runner ready) and from llama-server's start to its first token (health polled
 *   every 25 ms, then the request), with the page cache dropped first (cold: needs root) and
 *   without (warm). Rounds alternate between the two servers.
 *
 * `--engine` names the appliance's GGUF engine (`backends.gguf`): its managed llama-server by
 * default (the model process is then a llama-server too, and the appliance keeps no spare
 * node-llama-cpp runner), or `llama-cpp`.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/memory.ts [--model 1b-q4_0] [--reps 3] [--engine llama-cpp|llama-server]`.
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { applianceMemory, formatMemory as fmt, memoryOf, processTree as tree } from '../lib/process-memory.js';
import { ROOT } from '../../test/helpers/fixtures.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { benchThreads, buildLlamaServer } from './llama-server.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '1b-q4_0' },
    reps: { type: 'string', default: '3' },
    port: { type: 'string', default: '18971' },
    engine: { type: 'string', default: 'llama-server' },
  },
});
const REPS = Number(values.reps);
if (values.engine !== 'llama-cpp' && values.engine !== 'llama-server') throw new Error(`--engine: llama-cpp or llama-server, not ${values.engine}`);
/** The appliance's environment: its GGUF engine. */
const ENGINE_ENV: Record<string, string> = { LIA_BACKENDS: `gguf=${values.engine}` };
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function dropCaches(): void {
  writeFileSync('/proc/sys/vm/drop_caches', '3');
}

async function startServer(
  binary: string,
  model: string,
  port: number,
  slots: number,
  contextPerSlot: number,
): Promise<{ child: ChildProcess; t0: number; healthy: number }> {
  const t0 = performance.now();
  const child = spawn(
    binary,
    [
      '-m',
      model,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '-t',
      String(THREADS),
      '-tb',
      String(BATCH_THREADS),
      '-np',
      String(slots),
      '-c',
      String(slots * contextPerSlot),
      '-b',
      '512',
      '-ub',
      '512',
      '--no-webui',
      '--log-disable',
    ],
    { stdio: 'ignore' },
  );
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama-server exited (${child.exitCode ?? child.signalCode})`);
    if (
      await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { child, t0, healthy: performance.now() };
    await sleep(25);
  }
}

async function stopServer(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill();
  await exited;
}

async function main(): Promise<void> {
  const model = await benchModelPath(values.model);
  const binary = await buildLlamaServer();
  let port = Number(values.port);
  const report: Record<string, unknown> = {
    model: modelLabel(model),
    date: new Date().toISOString(),
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    engine: values.engine,
  };
  const lines: string[] = [];
  const say = (line: string) => {
    lines.push(line);
    console.error(line);
  };

  // Idle: the default plugin set, quiet for 8 s after start (the spare runner is up by then).
  {
    const app = await startApplianceProcess({}, ENGINE_ENV);
    await sleep(8000);
    const m = applianceMemory(app.pid);
    report['idle'] = m;
    say(`idle appliance: total ${fmt(m.total)}; API ${fmt(m.api)}; spare runner ${fmt(m.runner)}; ${tree(app.pid).length} processes`);
    await app.close();
  }

  // Loaded, and load time, per slot count.
  const load: Record<string, { appliance: number[]; llamaServer: number[] }> = {
    cold: { appliance: [], llamaServer: [] },
    warm: { appliance: [], llamaServer: [] },
  };
  for (const slots of [1, 4]) {
    const app = await startApplianceProcess(
      { plugins: { engine: { options: { numParallel: slots, contextLength: 2048, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } } } },
      ENGINE_ENV,
    );
    try {
      await createBenchModel(app, 'bench', model);
      const agent = app.dispatcher();
      await applianceGenerate(app, agent, 'bench', 'Once upon a time', 8);
      await sleep(4000);
      const a = applianceMemory(app.pid);
      port += 1;
      const server = await startServer(binary, model, port, slots, 2048);
      const plain = keepAlivePool(`http://127.0.0.1:${port}`);
      await llamaServerGenerate(`http://127.0.0.1:${port}`, plain, 'Once upon a time', 8);
      await sleep(1000);
      const l = memoryOf(server.child.pid!);
      await plain.close();
      await stopServer(server.child);
      report[`loaded-${slots}x2048`] = { appliance: a, llamaServer: l };
      say(
        `loaded, ${slots} × 2048: appliance runner ${fmt(a.runner)}; appliance total ${fmt(a.total)}; llama-server ${fmt(l)}; runner ÷ llama-server RSS ${(a.runner.rss / l.rss).toFixed(3)}, total ÷ llama-server ${(a.total.rss / l.rss).toFixed(3)}`,
      );

      if (slots !== 1) continue;
      // Load time, 1 slot × 2048: unload, let the spare runner come up, then time a request.
      for (let r = 0; r < REPS; r++) {
        for (const kind of ['cold', 'warm'] as const) {
          for (const who of r % 2 === 0 ? (['appliance', 'llamaServer'] as const) : (['llamaServer', 'appliance'] as const)) {
            if (who === 'appliance') {
              await app
                .fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'bench', prompt: '', keep_alive: 0 }) })
                .then((res) => res.text());
              await sleep(6000);
              if (kind === 'cold') dropCaches();
              const s = await applianceGenerate(app, agent, 'bench', 'Once upon a time', 1);
              load[kind]!.appliance.push(s.ttftMs);
              say(`load ${kind} appliance: ${s.ttftMs.toFixed(0)} ms`);
            } else {
              await sleep(1000);
              if (kind === 'cold') dropCaches();
              port += 1;
              const server = await startServer(binary, model, port, 1, 2048);
              const plain = keepAlivePool(`http://127.0.0.1:${port}`);
              const sent = performance.now();
              const s = await llamaServerGenerate(`http://127.0.0.1:${port}`, plain, 'Once upon a time', 1);
              const fromStart = sent + s.ttftMs - server.t0;
              const ms = s.ttftMs;
              load[kind]!.llamaServer.push(fromStart);
              say(
                `load ${kind} llama-server: ${fromStart.toFixed(0)} ms (healthy after ${(server.healthy - server.t0).toFixed(0)} ms, first token ${ms.toFixed(0)} ms after the request)`,
              );
              await plain.close();
              await stopServer(server.child);
            }
          }
        }
      }
    } finally {
      await app.close();
    }
  }
  report['load'] = load;
  for (const kind of ['cold', 'warm'] as const) {
    const ratios = load[kind]!.appliance.map((a, i) => a / load[kind]!.llamaServer[i]!);
    say(
      `load ${kind}: appliance median ${median(load[kind]!.appliance).toFixed(0)} ms, llama-server median ${median(load[kind]!.llamaServer).toFixed(0)} ms, appliance ÷ llama-server (median of pairs) ${median(ratios).toFixed(2)} [${ratios.map((x) => x.toFixed(2)).join(', ')}]`,
    );
  }
  report['loadavg'] = os.loadavg();
  const out = path.join(ROOT, 'bench/results');
  await mkdir(out, { recursive: true });
  await writeFile(path.join(out, `memory-${new Date().toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify({ ...report, lines }, null, 2));
  console.log(lines.join('\n'));
}

await main();
process.exit(0);
