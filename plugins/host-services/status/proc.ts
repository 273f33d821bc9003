/**
 * Pure readers of the Linux `/proc` figures behind `/system/status`: CPU time counters from
 * `/proc/stat` (busy share = the delta between two readings, never the average since boot) and
 * memory from `/proc/meminfo` (used = MemTotal − MemAvailable, so page cache does not count).
 *
 * @module
 */

/** Aggregate CPU counters (jiffies) of the `cpu` line. */
export interface CpuTimes {
  idle: number;
  total: number;
}

/** Parses the first (`cpu `) line of `/proc/stat`; iowait counts as idle. */
export function parseProcStat(text: string): CpuTimes {
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) throw new Error('/proc/stat has no aggregate cpu line');
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is already in user.
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
  return { idle: idle + iowait, total: user + nice + system + idle + iowait + irq + softirq + steal };
}

/** Busy percentage between two readings, one decimal; 0 when no time passed. */
export function cpuPercent(before: CpuTimes, after: CpuTimes): number {
  const total = after.total - before.total;
  const idle = after.idle - before.idle;
  if (total <= 0) return 0;
  return Math.round(Math.min(100, Math.max(0, ((total - idle) / total) * 100)) * 10) / 10;
}

/** Memory figures in bytes. */
export interface MemInfo {
  totalBytes: number;
  availableBytes: number;
}

/** Parses `/proc/meminfo`; without MemAvailable (kernels < 3.14) falls back to free + buffers + cached. */
export function parseMeminfo(text: string): MemInfo {
  const kb = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)/.exec(line);
    if (m?.[1] && m[2]) kb.set(m[1], Number(m[2]));
  }
  const total = kb.get('MemTotal');
  if (total === undefined) throw new Error('/proc/meminfo has no MemTotal');
  const available = kb.get('MemAvailable') ?? (kb.get('MemFree') ?? 0) + (kb.get('Buffers') ?? 0) + (kb.get('Cached') ?? 0);
  return { totalBytes: total * 1024, availableBytes: available * 1024 };
}
