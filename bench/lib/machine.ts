/**
 * What a benchmark result needs beside its figures: the machine it ran on (CPU model, cores,
 * memory, load average before the run), and a check that the servers compared ran the same
 * configuration, so that a ratio never compares unlike setups without saying so.
 *
 * @module
 */
import os from 'node:os';

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  /** 1, 5 and 15-minute load averages when the benchmark started. */
  loadBefore: number[];
  node: string;
}

/** Reads the machine; call it before starting any server, so the load is the machine's own. */
export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    loadBefore: os.loadavg().map((l) => Math.round(l * 100) / 100),
    node: process.version,
  };
}

/** One line for the benchmark's output, with a warning when the machine was busy at the start. */
export function machineLine(m: MachineInfo): string {
  const busy = (m.loadBefore[0] ?? 0) > m.cores * 0.25 ? ` — WARNING: load ${m.loadBefore[0]} on ${m.cores} cores before the run; figures are noisy` : '';
  return `machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, load ${m.loadBefore.join(' / ')} before the run, Node ${m.node}${busy}`;
}

/** A setting as each side reported it. */
export interface Setting {
  name: string;
  wanted: number;
  sides: Record<string, number | undefined>;
}

/**
 * Throws, naming every setting that differs, unless every side reported the wanted value: the
 * benchmark then stops instead of printing ratios of two different configurations.
 */
export function assertSameConfiguration(settings: Setting[]): void {
  const wrong = settings.flatMap((s) =>
    Object.entries(s.sides)
      .filter(([, value]) => value !== s.wanted)
      .map(([side, value]) => `${s.name}: ${side} ran ${value ?? 'an unknown value'}, the benchmark asked for ${s.wanted}`),
  );
  if (wrong.length > 0) throw new Error(`the servers did not run the same configuration:\n  ${wrong.join('\n  ')}`);
}
