/**
 * llama.cpp's own `llama-server` for the benchmarks: built by the same code as `lia engine build`
 * (plugins/backend-llama-server/build.ts: the source bundle node-llama-cpp ships, the same
 * llama.cpp release as the appliance's engine, CPU only, cached under `~/.cache/lia/llama-server/`
 * or `LIA_CACHE_DIR`; the build probes its CPU variants itself), and started with the thread counts every side of a benchmark gets.
 *
 * Run alone to build: `node --conditions=lia-source --import tsx bench/engine/llama-server.ts`.
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildLlamaServer as buildServer, llamaCppSource as cachedSource, leftOutVariants } from '../../plugins/backend-llama-server/build.js';
import { inferenceBatchThreads, inferenceThreads } from '../../plugins/engine/threads.js';
import { assertSameConfiguration } from '../lib/machine.js';
import { backendEnv, findGpuBackend, howToGet, type GpuBackendKind } from '../../plugins/backend-llama-server/devices.js';

/**
 * The llama.cpp source tree of the bundled release, for its Python `gguf-py`
 * (bench/models/build-1b.ts) and the web UI size check.
 */
export async function llamaCppSource(log: (line: string) => void = console.error): Promise<string> {
  return cachedSource(process.env, (p) => p.kind === 'step' && log(p.text));
}

/**
 * The path of a built `llama-server` (building it first when the cache is missing or stale, with
 * the product's own probe of its CPU variants).
 */
export async function buildLlamaServer(log: (line: string) => void = console.error): Promise<string> {
  let tenth = -1;
  const binary = await buildServer({
    onProgress: (p) => {
      if (p.kind === 'step') return log(p.text);
      const now = Math.floor((p.done / Math.max(1, p.total)) * 10);
      if (now > tenth) log(`compiling: ${(tenth = now) * 10}%`);
    },
  });
  return binary;
}

/**
 * A warning when the product's build left a CPU variant out because it died of a signal on this
 * machine (`lia engine build`'s probe): figures against that llama-server flatter the appliance
 * wherever the variant would help. Null otherwise.
 */
export function amxNote(): string | null {
  const left = leftOutVariants();
  if (left.length === 0) return null;
  return `llama-server runs without ${left.map((l) => `${l.variant} (died of ${l.signal} in the build's probe)`).join(', ')} on this machine`;
}

/**
 * The thread counts every side of a benchmark gets: the appliance's automatic ones for one loaded
 * model, or `LIA_THREADS` / `LIA_BATCH_THREADS` (llama-server's `-t` / `-tb`).
 */
export function benchThreads(): { threads: number; batchThreads: number } {
  const threads = inferenceThreads(Number(process.env['LIA_THREADS'] ?? 0));
  return { threads, batchThreads: inferenceBatchThreads(Number(process.env['LIA_BATCH_THREADS'] ?? 0), threads) };
}

/**
 * Starts llama-server on 127.0.0.1:`port` and resolves once `/health` answers 200. `batchThreads`
 * (`-tb`, prompt processing) defaults to `threads`. `jinja` turns on the GGUF's chat template for
 * `/v1/chat/completions` (off by default: `/completion` needs none). `args` are appended as they
 * are (`--mmproj <file>`, `--rerank`).
 */
export async function startLlamaServer(
  binary: string,
  opts: {
    model: string;
    port: number;
    threads: number;
    batchThreads?: number;
    parallel: number;
    contextPerSlot: number;
    jinja?: boolean;
    args?: readonly string[];
  },
): Promise<ChildProcess> {
  const child = spawn(
    binary,
    [
      '-m',
      opts.model,
      '--host',
      '127.0.0.1',
      '--port',
      String(opts.port),
      '-t',
      String(opts.threads),
      '-tb',
      String(opts.batchThreads ?? opts.threads),
      '-np',
      String(opts.parallel),
      '-c',
      String(opts.contextPerSlot * opts.parallel),
      '-b',
      '512',
      '-ub',
      '512',
      '--no-webui',
      '--log-disable',
      ...(opts.jinja ? ['--jinja'] : []),
      ...(opts.args ?? []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama-server exited (${child.exitCode ?? child.signalCode}): ${stderr}`);
    const ok = await fetch(`http://127.0.0.1:${opts.port}/health`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return child;
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill();
  throw new Error(`llama-server did not become healthy: ${stderr}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await buildLlamaServer());
}

/**
 * Stops a benchmark unless both servers run what it asked for: the context per sequence on each
 * side (the appliance's `/api/ps` for its model named `bench…`, llama-server's `/props` on
 * `port`) and llama-server's slot count.
 */
export async function checkSameConfiguration(
  app: { fetch(p: string): Promise<{ json(): Promise<unknown> }> },
  port: number,
  wanted: { context: number; slots: number },
): Promise<void> {
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; context_length?: number }[] };
  const props = (await (await fetch(`http://127.0.0.1:${port}/props`)).json()) as { total_slots?: number; default_generation_settings?: { n_ctx?: number } };
  assertSameConfiguration([
    {
      name: 'context per sequence',
      wanted: wanted.context,
      sides: { appliance: ps.models.find((m) => m.name.startsWith('bench'))?.context_length, 'llama-server': props.default_generation_settings?.n_ctx },
    },
    { name: 'slots', wanted: wanted.slots, sides: { 'llama-server': props.total_slots } },
  ]);
}

/**
 * Both sides on GPU back end `kind` (`--gpu vulkan|cuda` of the engine benchmarks), or on the CPU
 * for null: llama-server with every layer on the back end's first device (`--device Vulkan0
 * -ngl 999`) and the same back-end library (this process's environment, which the direct server
 * inherits; the appliance's servers get the same from LIA), and the appliance's
 * backend-llama-server config with its `gpu` setting, whose offload plan places the model. Name a
 * CPU-type Vulkan device such as Mesa's lavapipe with `GGML_VK_VISIBLE_DEVICES=0`.
 */
export function gpuSides(kind: GpuBackendKind | null, binary: string): { args: string[]; plugins: Record<string, unknown> } {
  if (!kind) return { args: [], plugins: {} };
  const backend = findGpuBackend(kind, binary);
  if (!backend) throw new Error(`--gpu ${kind}: llama-server has no ${kind} back end: ${howToGet(kind)}`);
  Object.assign(process.env, backendEnv(backend));
  return {
    args: ['--device', kind === 'cuda' ? 'CUDA0' : 'Vulkan0', '--n-gpu-layers', '999'],
    plugins: { 'backend-llama-server': { options: { gpu: kind } } },
  };
}
