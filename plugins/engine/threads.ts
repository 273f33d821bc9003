/**
 * The CPU thread count for inference. llama.cpp's CPU threads spin on barriers, so one thread more
 * than the free cores makes every token take hundreds of milliseconds (see docs/engine.md). The policy:
 * the cores really available (the smallest of the visible CPUs and the cgroup quota), minus one for
 * Node's event loop when there are 4 or more, and exactly 1 on machines with 2 cores or fewer.
 * Large batches (prompts, many streams) may use more (see {@link inferenceBatchThreads}).
 *
 * @module
 */
import os from 'node:os';
import { readTextOrNull } from 'lia/utils';

/** CPUs allowed by the cgroup quota (v2 `cpu.max`, else v1 `cfs_quota_us`); null when unlimited. */
export function cgroupCpuLimit(read: (file: string) => string | null = readTextOrNull): number | null {
  const v2 = read('/sys/fs/cgroup/cpu.max');
  if (v2 !== null) {
    const [quota, period] = v2.trim().split(/\s+/);
    if (quota === undefined || quota === 'max') return null;
    const q = Number(quota);
    const p = Number(period ?? 100000);
    return q > 0 && p > 0 ? q / p : null;
  }
  const quota = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim());
  const period = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
  return quota > 0 && period > 0 ? quota / period : null;
}

/** Cores usable by this process: visible CPUs, capped by the cgroup quota (rounded down, ≥ 1). */
export function availableCores(read?: (file: string) => string | null, visible = os.availableParallelism()): number {
  const quota = cgroupCpuLimit(read);
  return Math.max(1, Math.floor(quota === null ? visible : Math.min(visible, quota)));
}

/**
 * Threads per model: `configured` when it is above 0, else 1 on ≤ 2 cores and cores − 1 above 3.
 */
export function inferenceThreads(configured: number, cores: number = availableCores()): number {
  if (configured > 0) return Math.trunc(configured);
  if (cores <= 2) return 1;
  return cores >= 4 ? cores - 1 : cores;
}

/**
 * Threads for large batches (a prompt, or a generation step of many streams): `configured` when it
 * is above 0, else every available core, and never fewer than `threads`. A large batch is a matrix
 * product that more threads speed up; a one-stream generation step is not (see
 * plugins/backend-llama-cpp/runner/batch-threads.ts).
 */
export function inferenceBatchThreads(configured: number, threads: number, cores: number = availableCores()): number {
  if (configured > 0) return Math.trunc(configured);
  return Math.max(threads, cores);
}
