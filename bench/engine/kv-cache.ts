/**
 * KV-cache types against llama-server (issue 43): a 1.1B model (default `1b-32k-q4_0`, whose
 * trained context holds 8k) loaded with one slot of `--context` (8,192) tokens, its cache in each
 * of `--types` (f16, q8_0), flash attention on, in the appliance (`engine.kvCacheType`,
 * `engine.flashAttention`) and in a bare llama-server with the same settings (`-ctk/-ctv`,
 * `-fa on`, `--cache-ram 0`, as the appliance starts its own).
 *
 * Figures per type:
 * - **Memory** of the loaded model after one generation: the appliance's model process (its
 *   llama-server) against the bare llama-server, RSS and its anonymous part (the KV cache and the
 *   compute buffers; the file part is the mapped weights, the same on both sides), and the whole
 *   appliance (API process included) beside it. The ratio is appliance ÷ llama-server (≤ 1: at
 *   most llama-server's).
 * - **Decode** (tokens per second after the first, `--predict` tokens of a short prompt), the
 *   median of five generations per repetition, the two servers interleaved; the ratio is appliance
 *   ÷ llama-server (≥ 1: at least as fast), the median of the repetitions with their range beside it.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/kv-cache.ts [--reps 3] [--model 1b-32k-q4_0] [--types f16,q8_0]`
 * (the appliance runs from dist/: `npm run build` first). Writes `bench/results/kv-cache-<time>.json`.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { applianceMemory, formatMemory, memoryOf, type Memory } from '../lib/process-memory.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { decodeRate, type Stream } from './figures.js';
import { benchThreads, buildLlamaServer, checkSameConfiguration, startLlamaServer } from './llama-server.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '1b-32k-q4_0' },
    types: { type: 'string', default: 'f16,q8_0' },
    reps: { type: 'string', default: '3' },
    context: { type: 'string', default: '8192' },
    predict: { type: 'string', default: '64' },
    port: { type: 'string', default: '18981' },
  },
});
const REPS = Number(values.reps);
const CONTEXT = Number(values.context);
const PREDICT = Number(values.predict);
const TYPES = values.types.split(',');
const PROMPT = 'Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker who';
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface TypeResult {
  type: string;
  appliance: { runner: Memory; total: Memory; decode: number[] };
  llamaServer: { memory: Memory; decode: number[] };
  memoryRatio: number;
  anonRatio: number;
  decodeRatios: number[];
}

async function measureType(binary: string, model: string, type: string, port: number): Promise<TypeResult> {
  const server: ChildProcess = await startLlamaServer(binary, {
    model,
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: 1,
    contextPerSlot: CONTEXT,
    args: ['--cache-type-k', type, '--cache-type-v', type, '--flash-attn', 'on', '--cache-ram', '0'],
  });
  const app = await startApplianceProcess({
    backends: { gguf: 'llama-server' },
    plugins: {
      ...ENGINE_ONLY,
      engine: {
        options: {
          numParallel: 1,
          contextLength: CONTEXT,
          threads: THREADS,
          batchThreads: BATCH_THREADS,
          keepAlive: -1,
          kvCacheType: type,
          flashAttention: 'on',
        },
      },
    },
  });
  try {
    await createBenchModel(app, 'bench', model);
    const agent = app.dispatcher();
    const plain = keepAlivePool(`http://127.0.0.1:${port}`);
    const appliance = () => applianceGenerate(app, agent, 'bench', PROMPT, PREDICT);
    const direct = () => llamaServerGenerate(`http://127.0.0.1:${port}`, plain, PROMPT, PREDICT);
    await Promise.all([appliance(), direct()]);
    await checkSameConfiguration(app, port, { context: CONTEXT, slots: 1 });
    const ps = (await (await app.fetch('/api/ps')).json()) as { models: { kv_cache_type?: string; flash_attention?: string }[] };
    const shown = ps.models[0];
    if (shown?.kv_cache_type !== type) throw new Error(`the appliance loaded the model with a ${shown?.kv_cache_type} cache, not ${type}`);
    await sleep(2000);
    const a = applianceMemory(app.pid);
    const l = memoryOf(server.pid!);
    const result: TypeResult = {
      type,
      appliance: { runner: a.runner, total: a.total, decode: [] },
      llamaServer: { memory: l, decode: [] },
      memoryRatio: a.runner.rss / l.rss,
      anonRatio: a.runner.anon / l.anon,
      decodeRatios: [],
    };
    console.error(`${type}: appliance model process ${formatMemory(a.runner)}; whole appliance ${formatMemory(a.total)}; llama-server ${formatMemory(l)}`);
    for (let r = 0; r < REPS; r++) {
      const runs = { appliance: [] as Stream[], llamaServer: [] as Stream[] };
      for (let i = 0; i < 5; i++) {
        // Interleaved, the order alternating, so a drifting machine moves both sides.
        for (const who of i % 2 === 0 ? (['appliance', 'llamaServer'] as const) : (['llamaServer', 'appliance'] as const))
          runs[who].push(await (who === 'appliance' ? appliance() : direct()));
      }
      const pair = { appliance: decodeRate(runs.appliance), llamaServer: decodeRate(runs.llamaServer) };
      result.appliance.decode.push(pair.appliance);
      result.llamaServer.decode.push(pair.llamaServer);
      result.decodeRatios.push(pair.appliance / pair.llamaServer);
      console.error(
        `${type} rep ${r + 1}/${REPS}: decode appliance ${pair.appliance.toFixed(1)} tok/s, llama-server ${pair.llamaServer.toFixed(1)} tok/s, ratio ${(pair.appliance / pair.llamaServer).toFixed(3)}`,
      );
    }
    await plain.close();
    return result;
  } finally {
    server.kill('SIGKILL');
    await app.close();
  }
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await benchModelPath(values.model);
  const binary = await buildLlamaServer();
  const results: TypeResult[] = [];
  for (const [i, type] of TYPES.entries()) results.push(await measureType(binary, model, type, Number(values.port) + i));
  console.log(`\n${machineLine(machine)}`);
  console.log(`${modelLabel(model)}, 1 slot × ${CONTEXT}, flash attention on, threads ${THREADS}, ${PREDICT} tokens, ${REPS} repetitions`);
  const MB = 1024 * 1024;
  for (const r of results) {
    const ratios = r.decodeRatios;
    console.log(
      `${r.type}: model process RSS ${(r.appliance.runner.rss / MB).toFixed(0)} MB (anon ${(r.appliance.runner.anon / MB).toFixed(0)}) vs llama-server ${(r.llamaServer.memory.rss / MB).toFixed(0)} MB (anon ${(r.llamaServer.memory.anon / MB).toFixed(0)}): ratio ${r.memoryRatio.toFixed(3)} (anon ${r.anonRatio.toFixed(3)}); whole appliance ${(r.appliance.total.rss / MB).toFixed(0)} MB; decode ${median(r.appliance.decode).toFixed(1)} vs ${median(r.llamaServer.decode).toFixed(1)} tok/s: ratio ${median(ratios).toFixed(3)} (repetitions ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`,
    );
  }
  const file = await saveResult('kv-cache', { machine, model: modelLabel(model), context: CONTEXT, threads: THREADS, predict: PREDICT, results });
  console.log(`raw figures: ${file}`);
}

await main();
