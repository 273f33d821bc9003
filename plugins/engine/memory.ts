/**
 * The memory the scheduler may fill with loaded models when none is configured: 80 % of the
 * machine's RAM, or of the cgroup limit (`memory.max`) when that is lower. The rest is left to the
 * appliance itself, the page cache and the operating system.
 *
 * @module
 */
import os from 'node:os';
import { readTextOrNull } from 'lia/utils';

/** The cgroup v2 memory limit in bytes; null when there is none. */
export function cgroupMemoryLimit(read: (file: string) => string | null = readTextOrNull): number | null {
  const raw = read('/sys/fs/cgroup/memory.max') ?? read('/sys/fs/cgroup/memory/memory.limit_in_bytes');
  const n = Number(raw?.trim());
  // cgroup v1 reports "no limit" as a huge number.
  return Number.isFinite(n) && n > 0 && n < 2 ** 60 ? n : null;
}

/** `configured` when above 0, else 80 % of min(RAM, cgroup limit). */
export function memoryBudget(configured: number, total = os.totalmem(), limit = cgroupMemoryLimit()): number {
  if (configured > 0) return configured;
  return Math.floor(0.8 * Math.min(total, limit ?? Infinity));
}
