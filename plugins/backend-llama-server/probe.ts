/**
 * The engine probe: a `llama-server` binary is started once on the probe model (probe-model.ts:
 * Q4_0, Q8_0 and F16 matrices, a warm-up batch of two tokens) and asked for a short completion of
 * a prompt of several tokens, so a binary that starts but cannot compute on this CPU (a CPU
 * variant whose kernels die of SIGILL here) is known before a user's model is given to it. It
 * runs after `lia engine build`, for `lia engine build --check`, and before the engine takes its
 * first model in a process (the packaged binary's start check).
 *
 * A result is remembered per binary (its path, size and modification time) and CPU (model and
 * flags) in memory and in `<cache>/llama-server/probes/` (`cacheDir`: build.ts's cache root), so a process start reads a file instead
 * of starting a server; a rebuilt binary or another CPU is probed again.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { isAppError } from 'lia/plugin';
import { writeProbeModel } from './probe-model.js';
import { LlamaServer } from './server.js';
import { privateDir } from './temp-dirs.js';

export interface ProbeResult {
  /** The binary computed the probe's completion. */
  ok: boolean;
  /** The CPU variant it loaded (`libggml-cpu-icelake.so`), null when it did not say. */
  variant: string | null;
  /** The signal it died of, null when it did not die of one. */
  signal: string | null;
  /** One line for a person: what ran, or why it failed. */
  message: string;
}

/** The CPU's model name and feature flags, as the kernel lists them (read once per process). */
let signature: string | null = null;
function cpuSignature(): string {
  return (signature ??= readCpuSignature());
}

function readCpuSignature(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const field = (name: string) => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(info)?.[1] ?? '';
    return `${field('model name')}|${field('flags')}`;
  } catch {
    return `${os.cpus()[0]?.model ?? ''}|${os.arch()}`;
  }
}

/** Changes when the probe model or what a result holds changes: results of another version are not read. */
const PROBE_VERSION = 1;

/** The key a result is remembered under, or null for a binary that is not there. */
function probeKey(binary: string): string | null {
  try {
    const real = realpathSync(binary);
    const st = statSync(real);
    return createHash('sha256').update(`${PROBE_VERSION}\0${real}\0${st.size}\0${st.mtimeMs}\0${cpuSignature()}`).digest('hex').slice(0, 24);
  } catch {
    return null;
  }
}

/**
 * ggml's x86 CPU variants (`GGML_CPU_ALL_VARIANTS` in the bundled release's ggml/src/CMakeLists.txt)
 * by the instruction-set features each one is compiled with, as the server's `system_info` line
 * prints them (SSE3 and SSSE3 aside: every variant but `x64` has them).
 */
const VARIANTS: ReadonlyArray<[string, string]> = [
  ['x64', ''],
  ['sse42', ''],
  ['sandybridge', 'AVX'],
  ['ivybridge', 'AVX F16C'],
  ['piledriver', 'AVX F16C FMA'],
  ['haswell', 'AVX AVX2 F16C FMA BMI2'],
  ['alderlake', 'AVX AVX_VNNI AVX2 F16C FMA BMI2'],
  ['skylakex', 'AVX AVX2 F16C FMA BMI2 AVX512'],
  ['cannonlake', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI'],
  ['cascadelake', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VNNI'],
  ['icelake', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI AVX512_VNNI'],
  ['cooperlake', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VNNI AVX512_BF16'],
  ['zen4', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16'],
  ['sapphirerapids', 'AVX AVX2 F16C FMA BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_INT8'],
];
const ISA = new Set(VARIANTS.flatMap(([, f]) => f.split(' ')).filter(Boolean));

/**
 * The file of the CPU variant a server runs, from the features its `system_info` line lists
 * (`CPU : SSE3 = 1 | … | AVX512_BF16 = 1 | LLAMAFILE = 1 |`): `libggml-cpu-zen4.so`. Null when the
 * output has no such line or its features are no variant's (another release, another build).
 */
export function variantOf(output: string): string | null {
  const line = /system_info:.*?CPU : ([^\n]*)/.exec(output)?.[1];
  if (line === undefined) return null;
  const on = new Set([...line.matchAll(/([A-Z0-9_]+) = 1/g)].map((m) => m[1]!));
  const isa = [...on]
    .filter((f) => ISA.has(f))
    .sort()
    .join(' ');
  const found = VARIANTS.filter(([, f]) => f.split(' ').filter(Boolean).sort().join(' ') === isa).map(([name]) => name);
  // x64 and sse42 differ only in SSE3 (implied by SSE4.2).
  const name = found.length > 1 ? (on.has('SSE3') ? 'sse42' : 'x64') : found[0];
  return name ? `libggml-cpu-${name}.so` : null;
}

/** Runs the probe on `binary` now (about a second), nothing remembered. */
export async function runProbe(binary: string, timeoutMs = 120_000): Promise<ProbeResult> {
  const dir = await privateDir('probe');
  let variant = null as string | null;
  let output = '';
  try {
    const model = path.join(dir, 'probe.gguf');
    await writeProbeModel(model);
    const server = await LlamaServer.start(
      {
        binary,
        model,
        // Two threads: the kernels run on ggml's thread pool, as they do for a user's model.
        threads: 2,
        batchThreads: 2,
        parallel: 1,
        contextPerSlot: 256,
        batchSize: 64,
        embedding: false,
        startTimeoutMs: timeoutMs,
        // Verbosity 4 prints the `system_info` line (the CPU variant's features) before the load.
        args: ['--log-verbosity', '4'],
        onOutput: (text) => {
          output = (output + text).slice(0, 32_768);
          variant ??= variantOf(output);
        },
      },
      () => undefined,
    );
    try {
      await server.fetchJson('POST', '/completion', { prompt: 'a cat sat on the mat', n_predict: 4, cache_prompt: false }, AbortSignal.timeout(timeoutMs));
    } finally {
      await server.stop();
    }
    return { ok: true, variant, signal: null, message: `computes Q4_0, Q8_0 and F16 matrices on this CPU${variant ? ` with ${variant}` : ''}` };
  } catch (err) {
    const signal = isAppError(err) ? (err.crash?.signal ?? null) : null;
    const what = variant ? `llama-server (${variant})` : 'llama-server';
    const message = signal
      ? `${what} dies of ${signal} computing a quantized model on this CPU`
      : `${what} cannot run the probe model: ${(err as Error).message}`;
    return { ok: false, variant, signal, message };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const remembered = new Map<string, Promise<ProbeResult>>();

/**
 * The probe's result for `binary` on this CPU: remembered (in this process, then on disk under
 * the cache) or run now. A probe that could not run for want of time or a port is not remembered.
 */
export function probeBinary(binary: string, cacheDir: string): Promise<ProbeResult> {
  const key = probeKey(binary);
  if (!key) return Promise.resolve({ ok: false, variant: null, signal: null, message: `${binary} is not there` });
  let result = remembered.get(key);
  if (!result) {
    result = (async () => {
      const file = path.join(cacheDir, 'llama-server', 'probes', `${key}.json`);
      const saved = await readFile(file, 'utf8')
        .then((t) => JSON.parse(t) as ProbeResult)
        .catch(() => null);
      if (saved && typeof saved.ok === 'boolean') return saved;
      const fresh = await runProbe(binary);
      if (fresh.ok || fresh.signal) {
        await mkdir(path.dirname(file), { recursive: true })
          .then(() => writeFile(file, JSON.stringify(fresh)))
          .catch(() => undefined); // a cache that cannot be written: probed again next time
      }
      return fresh;
    })();
    remembered.set(key, result);
  }
  return result;
}

/** Forgets what {@link probeBinary} remembered in this process (after a build replaced a binary in place). */
export function forgetProbes(): void {
  remembered.clear();
}
