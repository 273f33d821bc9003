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
import { closeSync, existsSync, openSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { inferenceBatchThreads, inferenceThreads } from '../../plugins/engine/threads.js';

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
 * Compiler flags beside `-march=native`. AMX is left out: a machine may report AMX tiles that its
 * hypervisor does not let a process use (seen on a 2-vCPU Sapphire Rapids guest: llama-server died
 * of SIGILL at its first matrix product), and the appliance's engine runs no AMX instruction there
 * either (node-llama-cpp's prebuilt Sapphire Rapids variant runs on that guest, so it never reaches
 * one). Every other extension the CPU has (AVX-512, VNNI, BF16) is used by both.
 */
const NATIVE_FLAGS = '-mno-amx-tile -mno-amx-int8 -mno-amx-bf16';

/** The path of a built `llama-server`, building it first when the cache is missing or stale. */
export async function buildLlamaServer(log: (line: string) => void = console.error): Promise<string> {
  const commit = `${sh('git', ['bundle', 'list-heads', BUNDLE], ROOT).trim().split(/\s+/)[0] as string} ${NATIVE_FLAGS}`;
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
      '-DGGML_NATIVE=ON', '-DGGML_CUDA=OFF', '-DGGML_VULKAN=OFF', '-DGGML_METAL=OFF',
      '-DLLAMA_CURL=OFF', '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_EXAMPLES=OFF', '-DLLAMA_BUILD_SERVER=ON',
      // Libraries found beside the binary ($ORIGIN), so the cache still works after it is moved.
      '-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON',
      `-DCMAKE_C_FLAGS=${NATIVE_FLAGS}`, `-DCMAKE_CXX_FLAGS=${NATIVE_FLAGS}`,
    ],
    CACHE,
  );
  log(`building llama-server with ${os.availableParallelism()} jobs (minutes)`);
  logged('cmake', ['--build', build, '--target', 'llama-server', '-j', String(os.availableParallelism())], CACHE);
  await writeFile(stamp, commit);
  return binary;
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
