/**
 * Where runner processes run (Linux CPU affinity). With `cpuAffinity: "auto"` (off by default), each
 * loaded model's runner is bound to CPUs of its own: the last `threads` CPUs this process may use
 * that no other runner holds, never the first one, which stays free for the API's event loop and
 * the network. A runner that finds no free CPUs left runs unbound until a bound one stops (then the
 * longest-waiting one takes its CPUs). Every runner runs unbound with `"off"`, on a machine with no
 * more CPUs than inference threads, or without `taskset` (util-linux, part of every Debian system).
 *
 * Why one would: a token is a decode job on a libuv thread, then a sampling job, each handed over
 * by the runner's event loop; bound to its own cores, a runner's hand-overs stay there and the API
 * process has the rest. Why it is off by default: in the engine benchmark it gained less than the
 * machine's noise, while a bound runner cannot move away from a core that something else keeps
 * busy (bench/results/2026-11-engine.md). Ollama and llama-server leave placement to the kernel too; llama.cpp offers the same
 * control (`--cpu-mask`).
 *
 * @module
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';
import { readTextOrNull } from 'lia/utils';

/** `auto`: bind runners to free CPUs when there are enough; `off`: never. */
export type CpuAffinityMode = 'auto' | 'off';

const run = promisify(execFile);
const TASKSET = ['/usr/bin/taskset', '/bin/taskset'].find((p) => existsSync(p)) ?? null;

/** Parses a kernel CPU list such as `0-3,8,10-11`; empty for anything else. */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) return [];
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    for (let c = from; c <= to; c++) cpus.push(c);
  }
  return cpus;
}

/** The CPUs this process may run on (`Cpus_allowed_list` of /proc/self/status); empty when unknown. */
export function allowedCpus(status: string | null = readTextOrNull('/proc/self/status')): number[] {
  const m = status ? /^Cpus_allowed_list:\s*(\S+)/m.exec(status) : null;
  return m ? parseCpuList(m[1]!) : [];
}

/**
 * The CPUs for one more runner of `threads` threads: the last `threads` of `allowed` (minus its
 * first CPU) that none of `taken` holds, or null when there are not enough.
 */
export function chooseCpus(allowed: readonly number[], taken: ReadonlySet<number>, threads: number): number[] | null {
  const free = allowed.slice(1).filter((c) => !taken.has(c));
  return threads >= 1 && free.length >= threads ? free.slice(free.length - threads) : null;
}

/** Binds runner processes to CPUs and keeps track of which runner holds which. */
export class CpuPlacement {
  readonly #mode: CpuAffinityMode;
  readonly #allowed: readonly number[];
  readonly #held = new Map<number, number[]>();
  /** Runners left unbound for want of free CPUs, oldest first, with their thread counts. */
  readonly #waiting = new Map<number, number>();

  constructor(mode: CpuAffinityMode, allowed: readonly number[] = mode === 'off' ? [] : allowedCpus()) {
    this.#mode = mode;
    this.#allowed = allowed;
  }

  /**
   * Binds every thread of process `pid` (and so the threads it starts later) to free CPUs for
   * `threads` inference threads. Returns the CPUs, or null when the runner stays unbound.
   */
  async place(pid: number, threads: number): Promise<number[] | null> {
    if (this.#mode === 'off' || TASKSET === null) return null;
    const taken = new Set([...this.#held.values()].flat());
    const cpus = chooseCpus(this.#allowed, taken, threads);
    if (!cpus) {
      this.#waiting.set(pid, threads);
      return null;
    }
    this.#waiting.delete(pid);
    this.#held.set(pid, cpus);
    try {
      await run(TASKSET, ['--all-tasks', '--pid', '--cpu-list', cpus.join(','), String(pid)]);
      return cpus;
    } catch {
      this.#held.delete(pid); // the process is gone, or binding is not allowed here
      return null;
    }
  }

  /**
   * Frees the CPUs of a runner that stopped, for the longest-waiting unbound runner that fits.
   * Resolves once that one is bound (or none was).
   */
  async release(pid: number): Promise<void> {
    this.#waiting.delete(pid);
    if (!this.#held.delete(pid)) return;
    for (const [waiting, threads] of this.#waiting) {
      if (await this.place(waiting, threads)) return;
    }
  }
}
