/**
 * llama.cpp's own `llama-server` for the benchmarks: built by the same code as `lia engine build`
 * (plugins/backend-llama-server/build.ts: the source bundle node-llama-cpp ships, the same
 * llama.cpp release as the appliance's engine, CPU only, cached under `~/.cache/lia/llama-server/`
 * or `LIA_CACHE_DIR`), checked once here for the AMX kernels (see {@link setAsideAmx}), and
 * started with the thread counts every side of a benchmark gets.
 *
 * Run alone to build: `node --conditions=lia-source --import tsx bench/engine/llama-server.ts`.
 *
 * @module
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildLlamaServer as buildServer, llamaCppSource as cachedSource } from '../../plugins/backend-llama-server/build.js';
import { inferenceBatchThreads, inferenceThreads } from '../../plugins/engine/threads.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { freePort } from '../lib/appliance-process.js';
import { assertSameConfiguration } from '../lib/machine.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CACHE = path.join(ROOT, 'bench/.cache/llama-server');

/**
 * The llama.cpp source tree of the bundled release, for its Python `gguf-py`
 * (bench/models/build-1b.ts) and the web UI size check.
 */
export async function llamaCppSource(log: (line: string) => void = console.error): Promise<string> {
  return cachedSource(process.env, (p) => p.kind === 'step' && log(p.text));
}

/**
 * The path of a built `llama-server` (building it first when the cache is missing or stale), its
 * AMX variant set aside where it dies of SIGILL on this machine.
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
  await setAsideAmx(binary, log);
  return binary;
}

const AMX_VARIANT = 'libggml-cpu-sapphirerapids.so';
const AMX_NOTE = path.join(CACHE, 'amx-set-aside');

/**
 * Starts the built server once on a Q4_0 model (its start-up decode runs the matrix kernels); when
 * it dies of SIGILL with the AMX variant present (llama.cpp's AMX kernels, as this compiler builds
 * them, lose their tile configuration on some machines where node-llama-cpp's prebuilt runs them
 * fine), moves that variant aside so the next best one loads, and leaves a note that
 * {@link amxNote} reports.
 */
async function setAsideAmx(binary: string, log: (line: string) => void): Promise<void> {
  const variant = path.join(path.dirname(binary), AMX_VARIANT);
  const probed = path.join(CACHE, 'amx-probed');
  if (existsSync(probed) && readFileSync(probed, 'utf8') === binary) return; // probed this binary already
  await mkdir(CACHE, { recursive: true });
  await rm(AMX_NOTE, { force: true });
  if (!existsSync(variant)) return void (await writeFile(probed, binary));
  const model = fixture('gguf/bench-random-135m-q4_0.gguf');
  try {
    const server = await startLlamaServer(binary, { model, port: await freePort(), threads: 1, parallel: 1, contextPerSlot: 256 });
    server.kill();
    await writeFile(probed, binary);
    return;
  } catch (err) {
    if (!/exited \(SIGILL\)/.test((err as Error).message)) throw err;
  }
  await rename(variant, `${variant}.sigill`);
  await writeFile(probed, binary);
  await writeFile(
    AMX_NOTE,
    `llama-server died of SIGILL in its AMX kernels on this machine; it runs without AMX, while the appliance's node-llama-cpp uses AMX here\n`,
  );
  log(`llama-server: ${AMX_VARIANT} died of SIGILL here and was set aside; figures against it flatter the appliance wherever AMX helps`);
}

/** A warning when this machine's llama-server runs without AMX (see {@link setAsideAmx}); null otherwise. */
export function amxNote(): string | null {
  return existsSync(AMX_NOTE) ? readFileSync(AMX_NOTE, 'utf8').trim() : null;
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
