/**
 * The benchmark's real-size model: a synthetic ~1.1B-parameter llama in TinyLlama-1.1B's shape
 * (hidden 2048, 22 layers, 32 heads, 4 KV heads, feed-forward 5632, context 2048) with the Llama-2
 * vocabulary of `../shared/models/gguf/llama-2-tiny-random.gguf` and random weights, in Q4_0 and
 * Q8_0 (about 0.6 and 1.2 GB). Written by build-1b.py with llama.cpp's own `gguf-py` from the
 * source bundle node-llama-cpp ships (the same release as the engine) and numpy; no download.
 * Cached under `bench/.cache/models/` and rebuilt only when build-1b.py changes.
 *
 * Run alone: `node --conditions=lia-source --import tsx bench/models/build-1b.ts` (prints the paths;
 * about two minutes of CPU).
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fixture, ROOT } from '../../test/helpers/fixtures.js';
import { llamaCppSource } from '../engine/llama-server.js';

const SCRIPT = fileURLToPath(new URL('./build-1b.py', import.meta.url));
const CACHE = path.join(ROOT, 'bench/.cache/models');

export type Quant = 'q4_0' | 'q8_0';

/** The path of the 1B model in `quant`, building both files first when missing or stale. */
export async function build1b(quant: Quant, log: (line: string) => void = console.error): Promise<string> {
  const stamp = path.join(CACHE, 'bench-random-1b.stamp');
  const digest = createHash('sha256')
    .update(await readFile(SCRIPT))
    .digest('hex');
  const file = (q: Quant) => path.join(CACHE, `bench-random-1b-${q}.gguf`);
  const fresh = existsSync(file('q4_0')) && existsSync(file('q8_0')) && (await readFile(stamp, 'utf8').catch(() => '')) === digest;
  if (!fresh) {
    const src = await llamaCppSource(log);
    const tmp = path.join(CACHE, 'tmp');
    await rm(tmp, { recursive: true, force: true });
    await mkdir(tmp, { recursive: true });
    log('writing bench-random-1b (Q4_0, Q8_0) with gguf-py and numpy (minutes)');
    execFileSync('python3', [SCRIPT, fixture('gguf/llama-2-tiny-random.gguf'), tmp], {
      env: { ...process.env, PYTHONPATH: path.join(src, 'gguf-py') },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    for (const q of ['q4_0', 'q8_0'] as const) await rename(path.join(tmp, path.basename(file(q))), file(q));
    await rm(tmp, { recursive: true, force: true });
    await writeFile(stamp, digest);
  }
  return file(quant);
}

/**
 * The Q4_0 1B model with a trained context of 32,768 tokens (the coding agents' setting: a
 * 6,300-token system prompt): a copy of it whose `llama.context_length` is set with gguf-py's
 * gguf_set_metadata; the weights are random either way, so nothing else changes.
 */
export async function build1b32k(log: (line: string) => void = console.error): Promise<string> {
  const base = await build1b('q4_0', log);
  const out = path.join(CACHE, 'bench-random-1b-32k-q4_0.gguf');
  const stamp = `${out}.stamp`;
  const digest = (await readFile(path.join(CACHE, 'bench-random-1b.stamp'), 'utf8')).trim();
  if (existsSync(out) && (await readFile(stamp, 'utf8').catch(() => '')) === digest) return out;
  const src = await llamaCppSource(log);
  await copyFile(base, `${out}.tmp`);
  execFileSync('python3', [path.join(src, 'gguf-py/gguf/scripts/gguf_set_metadata.py'), '--force', `${out}.tmp`, 'llama.context_length', '32768'], {
    env: { ...process.env, PYTHONPATH: path.join(src, 'gguf-py') },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await rename(`${out}.tmp`, out);
  await writeFile(stamp, digest);
  return out;
}

/**
 * The synthetic Q4_0 model in Llama-3-8B's shape (build-1b.py `8b`, about 3.7 GB): the GPU check's
 * large model. Built on first use (minutes and about 6 GB of memory), cached beside the 1B files.
 */
export async function build8b(log: (line: string) => void = console.error): Promise<string> {
  const out = path.join(CACHE, 'bench-random-8b-q4_0.gguf');
  const stamp = `${out}.stamp`;
  const digest = createHash('sha256')
    .update(await readFile(SCRIPT))
    .digest('hex');
  if (existsSync(out) && (await readFile(stamp, 'utf8').catch(() => '')) === digest) return out;
  const src = await llamaCppSource(log);
  const tmp = path.join(CACHE, 'tmp-8b');
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  log('writing bench-random-8b (Q4_0) with gguf-py and numpy (minutes)');
  execFileSync('python3', [SCRIPT, fixture('gguf/llama-2-tiny-random.gguf'), tmp, '8b'], {
    env: { ...process.env, PYTHONPATH: path.join(src, 'gguf-py') },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await rename(path.join(tmp, path.basename(out)), out);
  await rm(tmp, { recursive: true, force: true });
  await writeFile(stamp, digest);
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  for (const q of ['q4_0', 'q8_0'] as const) console.log(await build1b(q));
}
