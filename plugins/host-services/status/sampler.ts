/**
 * The status sampler behind `GET /system/status`: a background timer refreshes CPU, memory and
 * disk figures every interval; the route answers from the cached snapshot in microseconds. The
 * first CPU figure comes from two readings a short moment apart, so it is never the since-boot
 * average. All reads are asynchronous (`fs.promises.readFile`, `statfs`), so sampling never blocks
 * the event loop.
 *
 * @module
 */
import { readFile, stat, statfs } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { cpuPercent, parseMeminfo, parseProcStat, type CpuTimes, type MemInfo } from './proc.js';
import type { SystemStatus } from '../public.js';
import { toGiB, toTiBOrGiB } from './format.js';

/** Where to measure and how often. */
export interface StatusSamplerOptions {
  /** The model store's directory (its file system is `disk.models`). */
  modelsDir: string;
  /** Further directories whose file systems count toward `disk.total` (`/` and the data dir). */
  diskPaths: string[];
  intervalMs: number;
  /** Root of procfs. Defaults to `/proc`. */
  procRoot?: string;
}

interface DiskFigures {
  models: { total: number; used: number; free: number };
  total: number;
}

/** The nearest existing ancestor of `dir` (the store may not have created its folder yet). */
async function existing(dir: string): Promise<string> {
  let current = path.resolve(dir);
  for (;;) {
    try {
      await stat(current);
      return current;
    } catch {
      const parent = path.dirname(current);
      if (parent === current) return current;
      current = parent;
    }
  }
}

/** Background status sampling with a cached snapshot; see the module comment. */
export class StatusSampler {
  readonly #options: StatusSamplerOptions;
  readonly #proc: string;
  #cpuBefore: CpuTimes | null = null;
  #cpu = 0;
  #mem: MemInfo = { totalBytes: os.totalmem(), availableBytes: os.freemem() };
  #disk: DiskFigures = { models: { total: 0, used: 0, free: 0 }, total: 0 };
  #timer: NodeJS.Timeout | null = null;
  #lastError: string | null = null;

  constructor(options: StatusSamplerOptions) {
    this.#options = options;
    this.#proc = options.procRoot ?? '/proc';
  }

  /** The last sampling failure (for the log), or null. */
  get lastError(): string | null {
    return this.#lastError;
  }

  /** Takes a first full reading (with a real CPU delta), then samples every interval. */
  async start(): Promise<void> {
    if (this.#timer) return;
    this.#cpuBefore = await this.#cpuTimes();
    await new Promise((r) => setTimeout(r, 200));
    await this.sample();
    const tick = (): void => {
      this.#timer = setTimeout(() => void this.sample().finally(() => this.#timer && tick()), this.#options.intervalMs);
      this.#timer.unref();
    };
    tick();
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  /** Refreshes every figure; a failing source keeps its previous value. */
  async sample(): Promise<void> {
    const errors: string[] = [];
    try {
      const now = await this.#cpuTimes();
      if (this.#cpuBefore) this.#cpu = cpuPercent(this.#cpuBefore, now);
      this.#cpuBefore = now;
    } catch (err) {
      errors.push(`cpu: ${(err as Error).message}`);
    }
    try {
      this.#mem = parseMeminfo(await readFile(path.join(this.#proc, 'meminfo'), 'utf8'));
    } catch {
      this.#mem = { totalBytes: os.totalmem(), availableBytes: os.freemem() };
    }
    try {
      this.#disk = await this.#diskFigures();
    } catch (err) {
      errors.push(`disk: ${(err as Error).message}`);
    }
    this.#lastError = errors.length > 0 ? errors.join('; ') : null;
  }

  /** The cached figures with the given host name and version. */
  snapshot(hostname: string, version: string): SystemStatus {
    const { totalBytes, availableBytes } = this.#mem;
    const used = totalBytes > 0 ? ((totalBytes - availableBytes) / totalBytes) * 100 : 0;
    return {
      hostname,
      cpu_percent: this.#cpu,
      memory: {
        total_gb: Math.round((totalBytes / 1024 ** 3) * 10) / 10,
        used_percent: Math.round(used * 10) / 10,
      },
      disk: {
        models: { total: toGiB(this.#disk.models.total), used: toGiB(this.#disk.models.used), free: toGiB(this.#disk.models.free) },
        total: toTiBOrGiB(this.#disk.total),
      },
      uptime_seconds: Math.floor(os.uptime()),
      version: `v${version}`,
    };
  }

  async #cpuTimes(): Promise<CpuTimes> {
    try {
      return parseProcStat(await readFile(path.join(this.#proc, 'stat'), 'utf8'));
    } catch {
      // Not Linux (or no procfs): os.cpus() carries the same counters in milliseconds.
      let idle = 0;
      let total = 0;
      for (const cpu of os.cpus()) {
        const t = cpu.times;
        idle += t.idle;
        total += t.user + t.nice + t.sys + t.idle + t.irq;
      }
      return { idle, total };
    }
  }

  async #diskFigures(): Promise<DiskFigures> {
    const modelsPath = await existing(this.#options.modelsDir);
    const m = await statfs(modelsPath);
    const models = {
      total: m.blocks * m.bsize,
      used: (m.blocks - m.bfree) * m.bsize,
      free: m.bavail * m.bsize,
    };
    // Each file system once: identify it by the device number of a path on it.
    const seen = new Map<number, number>();
    for (const p of [modelsPath, ...this.#options.diskPaths]) {
      const dir = await existing(p);
      const dev = (await stat(dir)).dev;
      if (seen.has(dev)) continue;
      const s = dir === modelsPath ? m : await statfs(dir);
      seen.set(dev, s.blocks * s.bsize);
    }
    let total = 0;
    for (const size of seen.values()) total += size;
    return { models, total };
  }
}
