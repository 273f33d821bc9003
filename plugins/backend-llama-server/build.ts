/**
 * Builds llama.cpp's own `llama-server` from the llama.cpp source that node-llama-cpp ships
 * (`node_modules/node-llama-cpp/llama/gitRelease.bundle`, a git bundle of the very release
 * node-llama-cpp's own binaries are built from), CPU only, with cmake and Ninja (or Make), LIA's
 * patches applied (`patches/`), and probes the result on this CPU (probe.ts). `lia engine build`
 * runs it with a progress display; the benchmark (`bench/engine/llama-server.ts`) calls the same
 * code.
 *
 * The result is cached per llama.cpp release under {@link cacheRoot}
 * (`~/.cache/lia/llama-server/<commit>/`, or `$LIA_CACHE_DIR/llama-server/<commit>/`): the
 * cloned source in `src/`, the cmake tree in `build/`, the binary in `build/bin/llama-server`
 * with the shared libraries beside it (found through `$ORIGIN`, so the folder may be moved), the
 * whole log in `build.log`, and a stamp that says which release and options the binary is of.
 * A build runs once per release and options; a second `lia engine build` checks the stamp and the
 * binary and returns at once.
 *
 * A package may ship the build ({@link shippedBinary}: the Debian package puts the binary, its
 * libraries and the stamp in `llama-server/` of the installation); it is then the one used, and
 * nothing is built.
 *
 * @module
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, open, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { projectPath } from 'lia/utils';
import { forgetProbes, runProbe, type ProbeResult } from './probe.js';
import { alive } from './temp-dirs.js';

/**
 * Options beyond the CPU-only defaults, the same as the benchmark's: the CPU backend as loadable
 * variants, one per x86 generation, of which llama-server picks the best the CPU supports at
 * start (the way node-llama-cpp's prebuilt binaries are built), on ggml's own thread pool rather
 * than OpenMP. `-march=native` is avoided: the binary then runs on any x86-64 machine the cache
 * is copied to, and the benchmark compares like with like.
 */
export const BUILD_OPTIONS: readonly string[] = ['-DGGML_NATIVE=OFF', '-DGGML_BACKEND_DL=ON', '-DGGML_CPU_ALL_VARIANTS=ON', '-DGGML_OPENMP=OFF'];

/** The llama.cpp source bundle node-llama-cpp ships. */
export function sourceBundle(): string {
  return projectPath('node_modules', 'node-llama-cpp', 'llama', 'gitRelease.bundle');
}

/**
 * The cache folder of LIA's built tools: `LIA_CACHE_DIR` when set, else `$XDG_CACHE_HOME/lia`,
 * else `~/.cache/lia`.
 */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env['LIA_CACHE_DIR']) return path.resolve(env['LIA_CACHE_DIR']);
  const xdg = env['XDG_CACHE_HOME'];
  return path.join(xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache'), 'lia');
}

/** A build step that failed, or a tool that is missing; the message says what to do. */
export class BuildError extends Error {
  override readonly name = 'BuildError';
}

/** The commit of the bundled llama.cpp release (40 hex digits). */
export function bundledCommit(bundle: string = sourceBundle()): string {
  if (!existsSync(bundle)) throw new BuildError(`llama.cpp's source bundle is missing (${bundle}): run npm install`);
  const out = execFileSync('git', ['bundle', 'list-heads', bundle], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const commit = out.trim().split(/\s+/)[0] ?? '';
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new BuildError(`cannot read the commit of ${bundle}`);
  return commit;
}

/** Where the build of one llama.cpp release lives. */
export interface BuildPaths {
  /** `<cache>/llama-server/<first 12 digits of the commit>` */
  dir: string;
  src: string;
  build: string;
  binary: string;
  log: string;
  stamp: string;
}

export function buildPaths(commit: string, env: NodeJS.ProcessEnv = process.env): BuildPaths {
  const dir = path.join(cacheRoot(env), 'llama-server', commit.slice(0, 12));
  const build = path.join(dir, 'build');
  return {
    dir,
    src: path.join(dir, 'src'),
    build,
    binary: path.join(build, 'bin', 'llama-server'),
    log: path.join(dir, 'build.log'),
    stamp: path.join(dir, 'stamp'),
  };
}

/**
 * LIA's fixes to the bundled source, applied in name order to the cloned tree before it is
 * configured (`patches/*.patch`, in `git apply` form). Each patch says in its own comment what it
 * fixes and why; docs/backends.md lists them.
 */
export function sourcePatches(): string[] {
  const dir = projectPath('plugins', 'backend-llama-server', 'patches');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.patch'))
    .sort()
    .map((f) => path.join(dir, f));
}

/** What a stamp holds: the commit, the build options and a digest of the patches applied. */
function stampText(commit: string): string {
  const digest = createHash('sha256');
  for (const file of sourcePatches()) digest.update(path.basename(file)).update('\0').update(readFileSync(file)).update('\0');
  return `${commit} ${BUILD_OPTIONS.join(' ')} patches:${digest.digest('hex').slice(0, 16)}\n`;
}

/** True when `binary` starts (its shared libraries resolve) and prints its version. */
export function binaryStarts(binary: string): boolean {
  try {
    execFileSync(binary, ['--version'], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

/**
 * The binary of the bundled release that a package shipped (`llama-server/llama-server` of the
 * installation, with its libraries and the build's stamp beside it) when it is current and
 * starts; null otherwise.
 */
export async function shippedBinary(): Promise<string | null> {
  const binary = projectPath('llama-server', 'llama-server');
  if (!existsSync(binary)) return null;
  if ((await readFile(projectPath('llama-server', 'stamp'), 'utf8').catch(() => '')) !== stampText(bundledCommit())) return null;
  return binaryStarts(binary) ? binary : null;
}

/**
 * The binary of the bundled release: the one a package shipped ({@link shippedBinary}), else the
 * cached build when it is built, current and starts; null otherwise. Reads no more than the stamp
 * and runs `--version`.
 */
export async function cachedBinary(env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  const shipped = await shippedBinary();
  if (shipped) return shipped;
  const commit = bundledCommit();
  const p = buildPaths(commit, env);
  if (!existsSync(p.binary)) return null;
  if ((await readFile(p.stamp, 'utf8').catch(() => '')) !== stampText(commit)) return null;
  return binaryStarts(p.binary) ? p.binary : null;
}

/** How a build reports: a step, or the compile progress (`done` of `total` build steps). */
export type BuildProgress = { kind: 'step'; text: string } | { kind: 'compile'; done: number; total: number };

export interface BuildOptions {
  /** Parallel compile jobs. Defaults to the available CPUs. */
  jobs?: number;
  /** Run the compilers at a lower priority (`nice`), so a machine that serves stays responsive. Defaults to true. */
  nice?: boolean;
  env?: NodeJS.ProcessEnv;
  onProgress?: (p: BuildProgress) => void;
}

/** The tools a build needs, each with the Debian package that brings it. */
const TOOLS: ReadonlyArray<[string, string]> = [
  ['git', 'git'],
  ['cmake', 'cmake'],
  ['c++', 'g++ (or build-essential)'],
];

function which(tool: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * The llama.cpp source tree of the bundled release (cloned once from the bundle into the cache,
 * `<cache>/llama-server/<commit>/src`): what the server is built from, and where a fixture or
 * benchmark script finds llama.cpp's Python `gguf-py`.
 */
export async function llamaCppSource(env: NodeJS.ProcessEnv = process.env, report: (p: BuildProgress) => void = () => {}): Promise<string> {
  const commit = bundledCommit();
  const p = buildPaths(commit, env);
  await mkdir(p.dir, { recursive: true });
  if (!existsSync(path.join(p.src, '.git'))) {
    report({ kind: 'step', text: `cloning llama.cpp ${commit.slice(0, 12)} from node-llama-cpp's source bundle` });
    await rm(p.src, { recursive: true, force: true });
    await step('git', ['clone', '--quiet', sourceBundle(), p.src], p, false);
  }
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: p.src, encoding: 'utf8' }).trim();
  if (head !== commit) await step('git', ['-c', 'advice.detachedHead=false', 'checkout', '--quiet', commit], p, false, p.src);
  return p.src;
}

/**
 * The path of a built `llama-server` of the bundled release, building it first when the cache is
 * missing or stale. Holds a lock file in the release's folder while it builds, so two builds of
 * one release (a CLI and a test) never write the same tree: the second waits for the first.
 */
export async function buildLlamaServer(options: BuildOptions = {}): Promise<string> {
  const env = options.env ?? process.env;
  const report = options.onProgress ?? (() => {});
  const commit = bundledCommit();
  const p = buildPaths(commit, env);
  const ready = await cachedBinary(env);
  if (ready) return ready;

  const missing = TOOLS.filter(([tool]) => !which(tool)).map(([, pkg]) => pkg);
  if (missing.length > 0)
    throw new BuildError(`building llama-server needs ${missing.join(', ')}; install them (Debian: apt-get install git cmake g++) and run again`);

  await mkdir(p.dir, { recursive: true });
  const release = await lock(path.join(p.dir, 'build.lock'), report);
  try {
    if (await cachedBinary(env)) return p.binary; // built by whoever held the lock
    await writeFile(p.log, '');
    await llamaCppSource(env, report);
    await patchSource(p, report);
    // A tree configured in another folder (the cache moved) cannot be reconfigured in place.
    const cmakeCache = await readFile(path.join(p.build, 'CMakeCache.txt'), 'utf8').catch(() => null);
    if (cmakeCache !== null && !cmakeCache.includes(`CMAKE_CACHEFILE_DIR:INTERNAL=${p.build}\n`)) await rm(p.build, { recursive: true, force: true });
    report({ kind: 'step', text: 'configuring (CPU only, Release)' });
    await step(
      'cmake',
      [
        '-S',
        p.src,
        '-B',
        p.build,
        ...(which('ninja') ? ['-G', 'Ninja'] : []),
        '-DCMAKE_BUILD_TYPE=Release',
        '-DGGML_CUDA=OFF',
        '-DGGML_VULKAN=OFF',
        '-DGGML_METAL=OFF',
        '-DLLAMA_CURL=OFF',
        '-DLLAMA_BUILD_TESTS=OFF',
        '-DLLAMA_BUILD_EXAMPLES=OFF',
        '-DLLAMA_BUILD_SERVER=ON',
        // Libraries found beside the binary ($ORIGIN), so the cache still works after it is moved.
        '-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON',
        ...BUILD_OPTIONS,
      ],
      p,
      false,
    );
    // The CPU variants are loaded at run time, so the llama-server target does not pull them in.
    const help = execFileSync('cmake', ['--build', p.build, '--target', 'help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const variants = help
      .split('\n')
      .map((line) => /^(?:\.\.\. )?(ggml-cpu-[\w.-]+?)(?::|\s|$)/.exec(line.trim())?.[1])
      .filter((name): name is string => Boolean(name));
    const jobs = options.jobs ?? os.availableParallelism();
    report({
      kind: 'step',
      text: `compiling llama-server and ${variants.filter((v) => !v.endsWith('-feats')).length} CPU variants with ${jobs} jobs (minutes)`,
    });
    await step(
      'cmake',
      ['--build', p.build, '--target', 'llama-server', ...new Set(variants), '-j', String(jobs)],
      p,
      options.nice ?? true,
      undefined,
      (line) => {
        // Ninja: `[12/444] Building ...`; Make: `[ 12%] Building ...`.
        const ninja = /^\[(\d+)\/(\d+)\]/.exec(line);
        if (ninja) return report({ kind: 'compile', done: Number(ninja[1]), total: Number(ninja[2]) });
        const make = /^\[\s*(\d+)%\]/.exec(line);
        if (make) report({ kind: 'compile', done: Number(make[1]), total: 100 });
      },
    );
    if (!binaryStarts(p.binary)) throw new BuildError(`the build finished but ${p.binary} does not start; see ${p.log}`);
    await rm(leftOutFile(p), { force: true });
    const probe = await settleVariants(p, report);
    await writeFile(p.stamp, stampText(commit));
    report({ kind: 'step', text: `built ${p.binary}: ${probe.message}` });
    return p.binary;
  } finally {
    await release();
  }
}

/** Where a build names the CPU variants it left out, one `<file> <signal>` a line. */
function leftOutFile(p: Pick<BuildPaths, 'dir'>): string {
  return path.join(p.dir, 'left-out');
}

/**
 * The CPU variants a build left out because they died of a signal on this machine (see
 * {@link settleVariants}), each with the signal; empty when none or not built.
 */
export function leftOutVariants(env: NodeJS.ProcessEnv = process.env): Array<{ variant: string; signal: string }> {
  const p = buildPaths(bundledCommit(), env);
  try {
    return readFileSync(leftOutFile(p), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [variant = '', signal = ''] = line.split(' ');
        return { variant, signal };
      });
  } catch {
    return [];
  }
}

/**
 * Runs the engine probe on a fresh build. When the binary dies of a signal with a CPU variant
 * loaded, that variant cannot compute on this CPU: its file is removed from the build (and named
 * in `left-out`), so llama.cpp picks the next best one, and the probe runs again; the variant
 * every x86-64 CPU runs (`x64`) is never removed. Throws a {@link BuildError} when the binary
 * cannot compute with any variant, or fails otherwise.
 */
export async function settleVariants(p: Pick<BuildPaths, 'binary' | 'dir' | 'log'>, report: (p: BuildProgress) => void = () => {}): Promise<ProbeResult> {
  for (;;) {
    forgetProbes();
    report({ kind: 'step', text: 'probing: a quantized model on this CPU' });
    const probe = await runProbe(p.binary);
    if (probe.ok) return probe;
    const file = probe.variant ? path.join(path.dirname(p.binary), probe.variant) : null;
    if (!probe.signal || !file || !existsSync(file) || /-x64\./.test(probe.variant!)) throw new BuildError(`${probe.message}; see ${p.log}`);
    await rm(file);
    await writeFile(leftOutFile(p), `${probe.variant} ${probe.signal}\n`, { flag: 'a' });
    report({ kind: 'step', text: `${probe.message}: left out of this build, the next variant takes its place` });
  }
}

/**
 * Puts the cloned tree back to the bundled commit (a patch applied by an earlier build included)
 * and applies {@link sourcePatches}; a patch that no longer applies is a build error naming it.
 */
async function patchSource(p: BuildPaths, report: (p: BuildProgress) => void): Promise<void> {
  await step('git', ['checkout', '--quiet', '--', '.'], p, false, p.src);
  for (const patch of sourcePatches()) {
    report({ kind: 'step', text: `applying ${path.basename(patch)}` });
    await step('git', ['apply', '--whitespace=nowarn', patch], p, false, p.src).catch(() => {
      throw new BuildError(`${path.basename(patch)} does not apply to llama.cpp ${bundledCommit().slice(0, 12)}; see ${p.log}`);
    });
  }
}

/** Runs one build step, its output appended to the build log; `onLine` sees each stdout line. */
function step(cmd: string, args: string[], p: BuildPaths, nice: boolean, cwd?: string, onLine?: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const log = createWriteStream(p.log, { flags: 'a' });
    log.write(`$ ${cmd} ${args.join(' ')}\n`);
    // Ninja fully buffers its status lines when they go to a pipe; `stdbuf -oL` makes them come as
    // each step ends, for the progress display.
    const line = onLine && which('stdbuf') ? ['stdbuf', '-oL'] : [];
    const niced = nice && which('nice') ? ['nice', '-n', '10'] : [];
    const [file, ...argv] = [...niced, ...line, cmd, ...args] as [string, ...string[]];
    const child = spawn(file, argv, { cwd: cwd ?? p.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let rest = '';
    child.stdout.on('data', (d: Buffer) => {
      log.write(d);
      if (!onLine) return;
      rest += d.toString();
      let nl: number;
      while ((nl = rest.indexOf('\n')) >= 0) {
        onLine(rest.slice(0, nl));
        rest = rest.slice(nl + 1);
      }
    });
    child.stderr.on('data', (d: Buffer) => log.write(d));
    child.on('error', (err) => {
      log.end();
      reject(new BuildError(`${cmd} could not start (${err.message})`));
    });
    child.on('close', (code, signal) => {
      log.end();
      if (code === 0) resolve();
      else reject(new BuildError(`${cmd} ${args.slice(0, 3).join(' ')} ... failed (${signal ?? `exit ${code}`}); see ${p.log}`));
    });
  });
}

/**
 * Takes the lock file `file` (holding this process's id), waiting while another live process
 * holds it; a lock left by a process that is gone is taken over. Resolves with its release.
 */
async function lock(file: string, report: (p: BuildProgress) => void): Promise<() => Promise<void>> {
  let told = false;
  for (;;) {
    try {
      const fh = await open(file, 'wx');
      await fh.writeFile(String(process.pid));
      await fh.close();
      return () => unlink(file).catch(() => undefined);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number((await readFile(file, 'utf8').catch(() => '')).trim());
    if (!alive(holder)) {
      await unlink(file).catch(() => undefined);
      continue;
    }
    if (!told) report({ kind: 'step', text: `waiting for the build that process ${holder} runs` });
    told = true;
    await new Promise((r) => setTimeout(r, 2000));
  }
}
