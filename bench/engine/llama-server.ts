/**
 * Builds llama.cpp's own `llama-server` from the source bundle node-llama-cpp ships
 * (`node_modules/node-llama-cpp/llama/gitRelease.bundle`: the same llama.cpp release as the
 * appliance's engine), CPU only, with cmake. The build is cached under `bench/.cache/` (git-ignored)
 * and reused while the bundle's commit is unchanged.
 *
 * Run alone to build: `node --conditions=lia-source --import tsx bench/engine/llama-server.ts`.
 *
 * @module
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inferenceBatchThreads, inferenceThreads } from '../../plugins/engine/threads.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { freePort } from '../lib/appliance-process.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BUNDLE = path.join(ROOT, 'node_modules/node-llama-cpp/llama/gitRelease.bundle');
const CACHE = path.join(ROOT, 'bench/.cache/llama-server');

function sh(cmd: string, args: string[], cwd: string): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

/** Runs a build step with its (long) output going to `bench/.cache/llama-server/build.log`. */
function logged(cmd: string, args: string[], cwd: string): void {
  const fd = openSync(path.join(CACHE, 'build.log'), 'a');
  try {
    execFileSync(cmd, args, { cwd, stdio: ['ignore', fd, fd] });
  } catch (err) {
    throw new Error(`${cmd} ${args.join(' ')} failed; see ${path.join(CACHE, 'build.log')}`, { cause: err });
  } finally {
    closeSync(fd);
  }
}

/**
 * The llama.cpp source tree of the bundle's commit (cloned once into `bench/.cache/llama-server/src`),
 * for the server build and for its Python `gguf-py` (bench/models/build-1b.ts).
 */
export async function llamaCppSource(log: (line: string) => void = console.error): Promise<string> {
  const commit = sh('git', ['bundle', 'list-heads', BUNDLE], ROOT).trim().split(/\s+/)[0] as string;
  const src = path.join(CACHE, 'src');
  await mkdir(CACHE, { recursive: true });
  if (!existsSync(path.join(src, '.git'))) {
    log(`cloning llama.cpp ${commit.slice(0, 12)} from node-llama-cpp's bundle`);
    sh('git', ['clone', '--quiet', BUNDLE, src], CACHE);
  }
  if (sh('git', ['rev-parse', 'HEAD'], src).trim() !== commit) sh('git', ['checkout', '--quiet', commit], src);
  return src;
}

/** True when the binary starts (its shared libraries resolve). */
function starts(binary: string): boolean {
  try {
    execFileSync(binary, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Build options beyond the CPU-only defaults, chosen so that llama-server runs the engine code the
 * appliance's node-llama-cpp prebuilt runs: its CPU backend as loadable variants, one per x86
 * generation, of which the best the CPU supports is picked at start (so AMX on a CPU that has it,
 * as the prebuilt's Sapphire Rapids variant does), on ggml's own thread pool rather than OpenMP
 * (the prebuilt's CPU backends do not link libgomp). A `-march=native` build died of SIGILL in its
 * first AMX matrix product on a 2-vCPU Sapphire Rapids guest where the prebuilt runs AMX fine, and
 * one without AMX ran at half the prebuilt's speed there, which would have flattered the appliance.
 */
const BUILD_OPTIONS = ['-DGGML_NATIVE=OFF', '-DGGML_BACKEND_DL=ON', '-DGGML_CPU_ALL_VARIANTS=ON', '-DGGML_OPENMP=OFF'];

/** The path of a built `llama-server`, building it first when the cache is missing or stale. */
export async function buildLlamaServer(log: (line: string) => void = console.error): Promise<string> {
  const commit = `${sh('git', ['bundle', 'list-heads', BUNDLE], ROOT).trim().split(/\s+/)[0] as string} ${BUILD_OPTIONS.join(' ')}`;
  const src = path.join(CACHE, 'src');
  const build = path.join(CACHE, 'build');
  const binary = path.join(build, 'bin', 'llama-server');
  const stamp = path.join(CACHE, 'commit');
  if (existsSync(binary) && (await readFile(stamp, 'utf8').catch(() => '')) === commit && starts(binary)) return binary;

  await llamaCppSource(log);
  // A build configured elsewhere (the cache copied or moved) cannot be reconfigured in place.
  if (existsSync(path.join(build, 'CMakeCache.txt')) && !(await readFile(path.join(build, 'CMakeCache.txt'), 'utf8')).includes(`CMAKE_CACHEFILE_DIR:INTERNAL=${build}\n`)) {
    await rm(build, { recursive: true, force: true });
  }
  log('configuring (CPU only, Release)');
  logged(
    'cmake',
    [
      '-S', src, '-B', build, '-G', 'Ninja', '-DCMAKE_BUILD_TYPE=Release',
      '-DGGML_CUDA=OFF', '-DGGML_VULKAN=OFF', '-DGGML_METAL=OFF',
      '-DLLAMA_CURL=OFF', '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_EXAMPLES=OFF', '-DLLAMA_BUILD_SERVER=ON',
      // Libraries found beside the binary ($ORIGIN), so the cache still works after it is moved.
      '-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON',
      ...BUILD_OPTIONS,
    ],
    CACHE,
  );
  log(`building llama-server with ${os.availableParallelism()} jobs (minutes)`);
  // The CPU variants are loaded at run time, so llama-server's target does not pull them in.
  const variants = sh('cmake', ['--build', build, '--target', 'help'], CACHE)
    .split('\n')
    .map((line) => /^(ggml-cpu-[\w.-]+):/.exec(line.trim())?.[1])
    .filter((name): name is string => Boolean(name));
  logged('cmake', ['--build', build, '--target', 'llama-server', ...variants, '-j', String(os.availableParallelism())], CACHE);
  await setAsideAmx(binary, log);
  await writeFile(stamp, commit);
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
  await rm(AMX_NOTE, { force: true });
  if (!existsSync(variant)) return;
  const model = fixture('gguf/bench-random-135m-q4_0.gguf');
  try {
    const server = await startLlamaServer(binary, { model, port: await freePort(), threads: 1, parallel: 1, contextPerSlot: 256 });
    server.kill();
    return;
  } catch (err) {
    if (!/exited \(SIGILL\)/.test((err as Error).message)) throw err;
  }
  await rename(variant, `${variant}.sigill`);
  await writeFile(AMX_NOTE, `llama-server died of SIGILL in its AMX kernels on this machine; it runs without AMX, while the appliance's node-llama-cpp uses AMX here\n`);
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
 * `/v1/chat/completions` (off by default: `/completion` needs none).
 */
export async function startLlamaServer(
  binary: string,
  opts: { model: string; port: number; threads: number; batchThreads?: number; parallel: number; contextPerSlot: number; jinja?: boolean },
): Promise<ChildProcess> {
  const child = spawn(
    binary,
    [
      '-m', opts.model, '--host', '127.0.0.1', '--port', String(opts.port),
      '-t', String(opts.threads), '-tb', String(opts.batchThreads ?? opts.threads),
      '-np', String(opts.parallel), '-c', String(opts.contextPerSlot * opts.parallel),
      '-b', '512', '-ub', '512', '--no-webui', '--log-disable',
      ...(opts.jinja ? ['--jinja'] : []),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`llama-server exited (${child.exitCode ?? child.signalCode}): ${stderr}`);
    const ok = await fetch(`http://127.0.0.1:${opts.port}/health`).then((r) => r.ok, () => false);
    if (ok) return child;
    await new Promise((r) => setTimeout(r, 250));
  }
  child.kill();
  throw new Error(`llama-server did not become healthy: ${stderr}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  console.log(await buildLlamaServer());
}
