/**
 * Per-request LoRA adapter switching (issue 43): two adapters on one loaded base, requests
 * alternating between them, in the appliance and in a bare llama-server with the same two
 * adapters (`--lora-scaled a:0,b:0`, each request's `lora` field turning one on), the same
 * model, threads, slots and context.
 *
 * The appliance holds the base `bench` and two models made from it with `ADAPTER`
 * (`bench-a`, `bench-b`; /api/create `from` + `adapters`); the requests name `bench-a` and
 * `bench-b` in turn. The run checks that this reloads nothing: the appliance's llama-server keeps
 * its process id and `/api/ps` lists one model throughout.
 *
 * Figure: time to first token of a short raw prompt, each request switching adapter (llama-server
 * then evaluates the prompt anew: a slot's cache does not survive another adapter), median of
 * `--requests` per repetition; the ratio is llama-server ÷ appliance (≥ 1: the appliance is at
 * least as fast), the median of the per-repetition ratios, with their range beside it.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/adapters.ts [--reps 5] [--requests 12] [--slots 2]`
 * (the appliance runs from dist/: `npm run build` first). Writes `bench/results/adapters-<time>.json`.
 *
 * @module
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { BENCH_LORA_BASE } from '../../scripts/fixtures/tiny-lora.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { uploadBlob } from '../../test/helpers/models.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';
import { createBenchModel } from '../models/models.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from './llama-server.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    requests: { type: 'string', default: '12' },
    slots: { type: 'string', default: '2' },
    context: { type: 'string', default: '512' },
    port: { type: 'string', default: '18961' },
  },
});
const REPS = Number(values.reps);
const REQUESTS = Number(values.requests);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const PROMPT = 'The quick brown fox jumps over the lazy dog, and then it runs into the forest where';
const PREDICT = 8;
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = fixture(BENCH_LORA_BASE);
  const adapters = [await builtFixture('bench-lora-a.gguf'), await builtFixture('bench-lora-b.gguf')];
  const binary = await buildLlamaServer();
  const port = Number(values.port);
  const server: ChildProcess = await startLlamaServer(binary, {
    model,
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: SLOTS,
    contextPerSlot: CONTEXT,
    args: ['--lora-scaled', adapters.map((a) => `${a}:0`).join(',')],
  });
  const app = await startApplianceProcess({
    backends: { gguf: 'llama-server' },
    plugins: {
      ...ENGINE_ONLY,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
    },
  });
  try {
    await createBenchModel(app, 'bench', model);
    for (const [i, name] of ['bench-a', 'bench-b'].entries()) {
      const digest = await uploadBlob(app, adapters[i]!);
      const res = await app.fetch('/api/create', {
        method: 'POST',
        body: JSON.stringify({ model: name, from: 'bench', adapters: { [`${name}.gguf`]: digest }, stream: false }),
      });
      if (res.status !== 200) throw new Error(`creating ${name}: ${res.status} ${await res.text()}`);
    }
    const agent = app.dispatcher();
    const plain = keepAlivePool(`http://127.0.0.1:${port}`);
    const appliance = (i: number) => applianceGenerate(app, agent, i % 2 === 0 ? 'bench-a' : 'bench-b', PROMPT, PREDICT);
    const direct = (i: number) =>
      llamaServerGenerate(`http://127.0.0.1:${port}`, plain, PROMPT, PREDICT, { lora: [0, 1].map((id) => ({ id, scale: id === i % 2 ? 1 : 0 })) });
    const ps = async () => ((await (await app.fetch('/api/ps')).json()) as { models: { name: string }[] }).models.map((m) => m.name);
    // Warm both: the model load, then each adapter once.
    for (let i = 0; i < 4; i++) await Promise.all([appliance(i), direct(i)]);
    const loadedBefore = await ps();
    if (loadedBefore.length !== 1) throw new Error(`the appliance holds ${loadedBefore.join(', ')}: expected the one base`);
    const pid = await serverPid(app);
    const ratios: number[] = [];
    const rows: Array<{ appliance: number; llamaServer: number }> = [];
    for (let r = 0; r < REPS; r++) {
      const times = { appliance: [] as number[], llamaServer: [] as number[] };
      for (let i = 0; i < REQUESTS; i++) {
        // Interleaved, the order alternating, so a drifting machine moves both sides.
        const pair = i % 2 === 0 ? [appliance, direct] : [direct, appliance];
        for (const run of pair) {
          const s = await run(i);
          (run === appliance ? times.appliance : times.llamaServer).push(s.ttftMs);
        }
      }
      const row = { appliance: median(times.appliance), llamaServer: median(times.llamaServer) };
      rows.push(row);
      ratios.push(row.llamaServer / row.appliance);
      console.error(
        `rep ${r + 1}/${REPS}: appliance ${row.appliance.toFixed(1)} ms, llama-server ${row.llamaServer.toFixed(1)} ms, ratio ${(row.llamaServer / row.appliance).toFixed(3)}`,
      );
    }
    const loadedAfter = await ps();
    const samePid = (await serverPid(app)) === pid;
    if (loadedAfter.length !== 1 || !samePid)
      throw new Error(`the appliance reloaded while switching adapters: ${loadedAfter.join(', ')}, same process ${samePid}`);
    const ratio = median(ratios);
    console.log(`\n${machineLine(machine)}`);
    console.log(
      `bench-random-135m-q4_0 + 2 LoRA adapters, ${SLOTS} slots × ${CONTEXT}, threads ${THREADS}, ${REQUESTS} requests per repetition alternating adapters`,
    );
    console.log(
      `first token, appliance: ${median(rows.map((r) => r.appliance)).toFixed(1)} ms; llama-server: ${median(rows.map((r) => r.llamaServer)).toFixed(1)} ms`,
    );
    console.log(
      `ratio (llama-server ÷ appliance): ${ratio.toFixed(3)} (repetitions ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}); reloads: none (one model loaded, same server process)`,
    );
    const file = await saveResult('adapters', { machine, slots: SLOTS, context: CONTEXT, threads: THREADS, requests: REQUESTS, rows, ratios, ratio });
    console.log(`raw figures: ${file}`);
  } finally {
    server.kill('SIGKILL');
    await app.close();
  }
}

/**
 * The process ids of the llama-servers holding adapters (this benchmark's own and the
 * appliance's), with the models the appliance lists: a reload would change them.
 */
async function serverPid(app: { fetch(p: string): Promise<{ json(): Promise<unknown> }> }): Promise<string> {
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string }[] };
  const pids = execFileSync('pgrep', ['-f', '--', '--lora-scaled'], { encoding: 'utf8' }).trim().split('\n').sort();
  return `${ps.models.map((m) => m.name).join(',')}:${pids.join(',')}`;
}

await main();
