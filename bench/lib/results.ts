/**
 * Where a benchmark run's raw figures go: `bench/results/<name>-<time>.json`, beside the dated
 * logs of the runs the docs quote, with the date and the load average at the end of the run.
 *
 * @module
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

const RESULTS = path.resolve(import.meta.dirname, '..', 'results');

/** Writes `data` with `date` and `loadAfter` added; returns the file's path. */
export async function saveResult(name: string, data: Record<string, unknown>): Promise<string> {
  await mkdir(RESULTS, { recursive: true });
  const date = new Date().toISOString();
  const file = path.join(RESULTS, `${name}-${date.replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify({ date, loadAfter: os.loadavg(), ...data }, null, 2));
  return file;
}
