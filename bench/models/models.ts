/**
 * The benchmark models by name: `135m` (`../shared/models/gguf/bench-random-135m-q4_0.gguf`,
 * 124M parameters, where per-token overhead weighs most) and `1b-q4_0` / `1b-q8_0` (the synthetic
 * TinyLlama-shaped model of build-1b.ts, built on first use; `1b-32k-q4_0` the same with a trained
 * context of 32,768 tokens; `8b-q4_0` one in Llama-3-8B's shape, for GPUs), and how to create one in an appliance.
 *
 * @module
 */
import path from 'node:path';
import { fixture } from '../../test/helpers/fixtures.js';
import { uploadBlob } from '../../test/helpers/models.js';
import { build1b, build1b32k, build8b } from './build-1b.js';

export const BENCH_MODELS = ['135m', '1b-q4_0', '1b-q8_0', '1b-32k-q4_0', '8b-q4_0'] as const;
export type BenchModel = (typeof BENCH_MODELS)[number];

/** The GGUF file of a benchmark model (building the 1B files when missing). */
export async function benchModelPath(name: string): Promise<string> {
  if (name === '135m') return fixture('gguf/bench-random-135m-q4_0.gguf');
  if (name === '1b-q4_0' || name === '1b-q8_0') return build1b(name === '1b-q4_0' ? 'q4_0' : 'q8_0');
  if (name === '1b-32k-q4_0') return build1b32k();
  if (name === '8b-q4_0') return build8b();
  if (name.endsWith('.gguf')) return path.resolve(name);
  throw new Error(`unknown benchmark model ${name}: one of ${BENCH_MODELS.join(', ')}`);
}

/** The file's name without `.gguf`, as the results name the model. */
export const modelLabel = (file: string): string => path.basename(file, '.gguf');

/** Creates model `name` in the appliance from a GGUF file anywhere on disk (`/api/create`). */
export async function createBenchModel(
  app: {
    fetch(pathname: string, init?: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; text(): Promise<string> }>;
  },
  name: string,
  file: string,
): Promise<void> {
  const digest = await uploadBlob(app as never, file);
  const res = await app.fetch('/api/create', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: name, files: { [path.basename(file)]: digest }, stream: false }),
  });
  if (res.status !== 200) throw new Error(`creating ${name} from ${file} failed: ${res.status} ${await res.text()}`);
}
