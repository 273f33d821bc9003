/**
 * Resident memory of processes, read from /proc: one process, a process and everything below it,
 * and sums. Shared by the memory and KV-cache benchmarks.
 *
 * @module
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Bytes: resident (RSS), its anonymous and file-backed parts (the mapped weights), and PSS. */
export interface Memory {
  rss: number;
  anon: number;
  file: number;
  pss: number;
}

const MB = 1024 * 1024;

/** Memory of one process, bytes, from /proc (0 when it is gone). */
export function memoryOf(pid: number): Memory {
  const read = (f: string) => {
    try {
      return readFileSync(`/proc/${pid}/${f}`, 'utf8');
    } catch {
      return '';
    }
  };
  const kb = (text: string, key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
  const status = read('status');
  return { rss: kb(status, 'VmRSS'), anon: kb(status, 'RssAnon'), file: kb(status, 'RssFile'), pss: kb(read('smaps_rollup'), 'Pss') };
}

/** `pid` and every process below it. */
export function processTree(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(d)]);
    } catch {
      // gone meanwhile
    }
  }
  const out = [pid];
  for (let i = 0; i < out.length; i++) out.push(...(parents.get(out[i]!) ?? []));
  return out;
}

export const sumMemory = (ms: Memory[]): Memory =>
  ms.reduce((a, b) => ({ rss: a.rss + b.rss, anon: a.anon + b.anon, file: a.file + b.file, pss: a.pss + b.pss }), { rss: 0, anon: 0, file: 0, pss: 0 });

export const formatMemory = (m: Memory): string =>
  `RSS ${(m.rss / MB).toFixed(0)} MB (anon ${(m.anon / MB).toFixed(0)}, file ${(m.file / MB).toFixed(0)}), PSS ${(m.pss / MB).toFixed(0)} MB`;

/** An appliance's processes: the API, the child with the most memory (the loaded model), the rest, and the total. */
export function applianceMemory(apiPid: number): { api: Memory; runner: Memory; others: Memory; total: Memory } {
  const mems = processTree(apiPid)
    .filter((p) => p !== apiPid)
    .map(memoryOf)
    .sort((a, b) => b.rss - a.rss);
  const api = memoryOf(apiPid);
  return { api, runner: mems[0] ?? sumMemory([]), others: sumMemory(mems.slice(1)), total: sumMemory([api, ...mems]) };
}
