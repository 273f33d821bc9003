/**
 * Engine benchmark: the appliance (HTTPS + Bearer auth, `/api/generate`, NDJSON) against llama.cpp's
 * own `llama-server` (plain HTTP, `/completion`, SSE) built from the same llama.cpp release, both
 * serving one model (`--model`: `135m`, `../shared/models/gguf/bench-random-135m-q4_0.gguf`, the
 * default; `1b-q4_0` or `1b-q8_0`, the synthetic TinyLlama-shaped model of bench/models/build-1b.ts)
 * with the same threads, slots and context per slot, the same sampling (Ollama's defaults) and a
 * fixed number of generated tokens.
 *
 * Figures, each the median of `--reps` interleaved runs (each ratio the median of the ratios
 * within a repetition, which a machine drifting between repetitions affects less); every
 * repetition after the first starts a new llama-server and reloads the appliance's model (a new
 * runner), so that the luck of where a process's memory lands is drawn anew each time:
 * - single-stream decode tokens/s (client side: first to last token; median of 5 requests per run);
 * - time to first token (client side: request sent to first token; the same 5 requests);
 * - aggregate tokens/s with 4 and 16 concurrent streams (all tokens / wall time);
 * - time to first token of a ~512-token prompt that no cache holds (median of 3).
 * Ratios are appliance ÷ llama-server for rates and llama-server ÷ appliance for TTFT, so ≥ 1.0
 * means the appliance is at least as good. A third column, `library`, runs the runner's generation
 * code in-process with no HTTPS, auth or IPC (library.ts; skip it with `--no-library`): the ceiling
 * node-llama-cpp leaves the appliance, measured in the same run. Both servers are driven by the same client, undici's
 * `request` (Node streams): `fetch` spent 1.5–3 ms of its own per request on this machine, which
 * the TTFT figure would have charged to the server. Requests go over open connections (see
 * bench/lib/connections.ts: otherwise most of them paid the appliance's TLS handshake).
 *
 * It prints the machine (CPU, cores, load before the run) first and with the results, and stops
 * with an error naming the setting when the two servers do not run the same context per sequence
 * or slot count.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/run.ts [--model 135m|1b-q4_0|1b-q8_0] [--reps 3] [--tokens 128] [--slots 16] [--context 512] [--no-library] [--engine llama-cpp|llama-server] [--gpu cpu|vulkan|cuda]`
 * (the appliance's engine for GGUF, set as `backends.gguf`: its managed llama-server by default, as where it is built, or `--engine llama-cpp`)
 * (the 512-token prompt needs a context above 512 per slot: `--context 1024`). Results are also written to
 * `bench/results/engine-<time>.json` (next to the dated logs of earlier runs).
 *
 * @module
 */
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { runnerTunables } from '../../plugins/backend-llama-cpp/huge-pages.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { countConnections, keepAlivePool, resent } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { ROOT } from '../../test/helpers/fixtures.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { measureFigures, PROMPT, type Figures, type Generate } from './figures.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';
import { amxNote, benchThreads, buildLlamaServer, checkSameConfiguration, gpuSides, startLlamaServer } from './llama-server.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import type { GpuBackendKind } from '../../plugins/backend-llama-server/devices.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    tokens: { type: 'string', default: '128' },
    port: { type: 'string', default: '18931' },
    'no-library': { type: 'boolean', default: false },
    slots: { type: 'string', default: '16' },
    context: { type: 'string', default: '512' },
    model: { type: 'string', default: '135m' },
    engine: { type: 'string', default: 'llama-server' },
    gpu: { type: 'string', default: 'cpu' },
  },
});
/**
 * `--gpu vulkan` or `--gpu cuda`: both servers run every layer on the back end's first device
 * (`gpuSides`), the appliance's placement checked to be the whole model. The library column is
 * left out (it runs node-llama-cpp on the CPU).
 */
if (!['cpu', 'vulkan', 'cuda'].includes(values.gpu)) throw new Error(`--gpu ${values.gpu}: cpu, vulkan or cuda`);
const GPU = values.gpu === 'cpu' ? null : (values.gpu as GpuBackendKind);
const REPS = Number(values.reps);
const TOKENS = Number(values.tokens);
/** Slots (parallel sequences) and context per slot, the same on every side. Defaults to 16 × 512. */
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

/** A server under test: one streaming generation, timed on the client side. */
type Target = { name: string; generate: Generate };

/**
 * The ceiling (see library.ts): the runner's generation code in a process of its own, with the
 * libuv pool and the glibc tunables a runner gets (huge pages unless `LIA_HUGE_PAGES=off`, see
 * huge-pages.ts) and no HTTP or IPC. One load and warm-up per repetition.
 */
async function measureLibrary(model: string): Promise<Figures> {
  const pool = String(Math.min(6, Math.max(2, os.availableParallelism())));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      '--import',
      'tsx',
      path.join(ROOT, 'bench/engine/library.ts'),
      String(THREADS),
      String(TOKENS),
      String(SLOTS),
      String(CONTEXT),
      String(BATCH_THREADS),
      model,
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        UV_THREADPOOL_SIZE: pool,
        GLIBC_TUNABLES: runnerTunables(process.env['LIA_HUGE_PAGES'] === 'off' ? 'off' : 'auto', process.env['GLIBC_TUNABLES']),
      },
    },
  );
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as Figures;
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await benchModelPath(values.model);
  const binary = await buildLlamaServer();
  let port = Number(values.port);
  const { args: gpuArgs, plugins: gpuPlugins } = gpuSides(GPU, binary);
  const startServer = () =>
    startLlamaServer(binary, { model, port, threads: THREADS, batchThreads: BATCH_THREADS, parallel: SLOTS, contextPerSlot: CONTEXT, args: gpuArgs });
  let server = await startServer();
  // Servers of earlier repetitions, stopped at the end.
  const retired: ChildProcess[] = [];
  const app = await startApplianceProcess({
    // The appliance's engine for GGUF, named: its managed llama-server (the default) or node-llama-cpp (`--engine llama-cpp`).
    backends: { gguf: values.engine },
    plugins: {
      ...ENGINE_ONLY,
      ...gpuPlugins,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
    },
  });
  try {
    await createBenchModel(app, 'bench', model);
    const agent = app.dispatcher();
    const appliance: Target = {
      name: 'appliance',
      generate: (prompt = PROMPT, predict = TOKENS) => applianceGenerate(app, agent, 'bench', prompt, predict),
    };
    let plain = keepAlivePool(`http://127.0.0.1:${port}`);
    const llamaServer: Target = {
      name: 'llama-server',
      generate: (prompt = PROMPT, predict = TOKENS) => llamaServerGenerate(`http://127.0.0.1:${port}`, plain, prompt, predict),
    };

    // Warm both (model load, caches, and the connections the widest figure needs).
    // Between the two, a pause: after a load the appliance starts its next spare runner once it has
    // been quiet for 1 s (about 2 s of start-up, 1.3 s of CPU), which must land in neither
    // server's figures.
    const warm = async () => {
      for (const target of [appliance, llamaServer]) {
        if (target === llamaServer) await new Promise((resolve) => setTimeout(resolve, 3000));
        await Promise.all(Array.from({ length: SLOTS }, () => target.generate(PROMPT, 8)));
      }
    };
    await warm();
    await checkSameConfiguration(app, port, { context: CONTEXT, slots: SLOTS });
    if (GPU) {
      const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; size_vram: number }[] };
      const vram = ps.models.find((m) => m.name.startsWith('bench'))?.size_vram ?? 0;
      if (vram <= 0) throw new Error(`--gpu ${GPU}: the appliance did not place the model on the device (size_vram 0)`);
      console.log(`appliance: ${(vram / 2 ** 20).toFixed(1)} MiB placed on the device by the offload plan; llama-server: ${gpuArgs.join(' ')}`);
    }
    const connections = countConnections();
    const results: Record<string, Figures[]> = { appliance: [], 'llama-server': [], library: [] };
    for (let r = 0; r < REPS; r++) {
      if (r > 0) {
        // New processes for every repetition: where a process's memory lands in a VM moved decode
        // by 4-7 % between two identical llama-servers side by side (docs/engine.md, Benchmark),
        // and a run that kept its processes kept that luck in every repetition.
        retired.push(server);
        port += 1;
        server = await startServer();
        plain = keepAlivePool(`http://127.0.0.1:${port}`);
        await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'bench', prompt: '', keep_alive: 0 }) }).then((res) => res.text());
        await warm();
        await checkSameConfiguration(app, port, { context: CONTEXT, slots: SLOTS });
        if (GPU) {
          const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; size_vram: number }[] };
          const vram = ps.models.find((m) => m.name.startsWith('bench'))?.size_vram ?? 0;
          if (vram <= 0) throw new Error(`--gpu ${GPU}: the appliance did not place the model on the device (size_vram 0)`);
          console.log(`appliance: ${(vram / 2 ** 20).toFixed(1)} MiB placed on the device by the offload plan; llama-server: ${gpuArgs.join(' ')}`);
        }
      }
      connections.on = true;
      for (const target of r % 2 === 0 ? [appliance, llamaServer] : [llamaServer, appliance]) {
        results[target.name]!.push(await measureFigures((prompt, predict) => target.generate(prompt, predict), SLOTS));
        console.error(`rep ${r + 1}/${REPS} ${target.name}: ${JSON.stringify(results[target.name]!.at(-1))}`);
      }
      connections.on = false;
      if (!values['no-library'] && !GPU) {
        results['library']!.push(await measureLibrary(model));
        console.error(`rep ${r + 1}/${REPS} library: ${JSON.stringify(results['library']!.at(-1))}`);
      }
    }
    const med = (name: string, key: keyof Figures) => (results[name]!.length ? median(results[name]!.map((x) => x[key])) : NaN);
    connections.stop();
    // Each figure's ratio is the median of the per-repetition ratios: the targets of one repetition
    // run back to back, so a machine that drifts between repetitions moves both sides of a ratio.
    const paired = (name: string, key: keyof Figures): number => {
      const xs = results[name]!;
      if (xs.length === 0) return NaN;
      return median(
        xs.map((x, i) => (key === 'ttft' || key === 'ttftLong' ? results['llama-server']![i]![key] / x[key] : x[key] / results['llama-server']![i]![key])),
      );
    };
    const figures =
      SLOTS >= 64 ? (['decode', 'ttft', 'agg4', 'agg16', 'agg64', 'ttftLong'] as const) : (['decode', 'ttft', 'agg4', 'agg16', 'ttftLong'] as const);
    const rows = figures.map((key) => ({
      figure: key,
      appliance: med('appliance', key),
      llamaServer: med('llama-server', key),
      ratio: paired('appliance', key),
      library: med('library', key),
      libraryRatio: paired('library', key),
    }));
    const labels = {
      decode: 'single-stream decode (tok/s)',
      ttft: 'time to first token (ms)',
      agg4: 'aggregate, 4 streams (tok/s)',
      agg16: 'aggregate, 16 streams (tok/s)',
      agg64: 'aggregate, 64 streams (tok/s)',
      ttftLong: 'TTFT, 512-token prompt (ms)',
    };
    console.log(`\n${machineLine(machine)}`);
    console.log(
      `${modelLabel(model)}, ${TOKENS} tokens per stream, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT} context, median of ${REPS}`,
    );
    const amx = amxNote();
    if (amx) console.log(`WARNING: ${amx}: the llama-server ratios are not like-for-like on this machine`);
    console.log('(figures: medians over the repetitions; ratios: medians of the ratios within each repetition)');
    console.log(
      `${'figure'.padEnd(32)}${'appliance'.padStart(12)}${'llama-server'.padStart(14)}${'ratio'.padStart(8)}${'library'.padStart(10)}${'ratio'.padStart(8)}`,
    );
    for (const r of rows) {
      console.log(
        `${labels[r.figure].padEnd(32)}${r.appliance.toFixed(1).padStart(12)}${r.llamaServer.toFixed(1).padStart(14)}${r.ratio.toFixed(2).padStart(8)}` +
          `${r.library.toFixed(1).padStart(10)}${r.libraryRatio.toFixed(2).padStart(8)}`,
      );
    }
    console.log("library: the runner's generation code in-process, no HTTPS, auth or IPC (bench/engine/library.ts): the ceiling node-llama-cpp leaves");
    const out = path.join(ROOT, 'bench/results');
    await mkdir(out, { recursive: true });
    console.log(
      `connections opened while timing: ${JSON.stringify(connections.opened)}; requests sent again on a new connection (timedPost): ${JSON.stringify(resent)}`,
    );
    await writeFile(
      path.join(out, `engine-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
      JSON.stringify(
        {
          model: modelLabel(model),
          engine: values.engine,
          gpu: values.gpu,
          date: new Date().toISOString(),
          machine,
          loadavg: os.loadavg(),
          threads: THREADS,
          batchThreads: BATCH_THREADS,
          tokens: TOKENS,
          slots: SLOTS,
          context: CONTEXT,
          rows,
          raw: results,
        },
        null,
        2,
      ),
    );
    await plain.close();
  } finally {
    await app.close();
    // SIGKILL: a server on a Vulkan device was seen to outlive SIGTERM (lavapipe), and nothing of theirs is kept.
    server.kill('SIGKILL');
    for (const old of retired) old.kill('SIGKILL');
  }
}

await main();
// The retired servers' connections may still be open in undici's pools.
process.exit(0);
