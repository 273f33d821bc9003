/**
 * KV cache type and flash attention per model (issue 43, item 3), on both GGUF engines, as a user
 * sets them: `PARAMETER kv_cache_type q8_0` / `flash_attention` in the Modelfile (here through
 * `/api/create`'s `parameters`), the config default (`LIA_KV_CACHE_TYPE`), and what `/api/ps`
 * shows. A quantized cache needs flash attention, so with it off the model loads with f16, as
 * Ollama does, and so does a model whose attention heads the quantized type's blocks do not divide.
 * llama-server gets `-ctk/-ctv` and `-fa`; node-llama-cpp the same through its context options. A
 * bad value is a 400 naming the choices.
 */
import t, { type Test } from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';
import { llamaServerArgs, requireLlamaServer } from '../helpers/engines.js';
import type { TestAppliance } from '../helpers/appliance.js';

requireLlamaServer();

// 64-wide heads, which a q8_0 or q4_0 cache's blocks of 32 divide.
const MODEL = 'gguf/bench-random-135m-q4_0.gguf';
// 16-wide heads: no quantized cache fits.
const NARROW = 'gguf/tinystories-656k-q8_0.gguf';

interface PsModel {
  name: string;
  size: number;
  kv_cache_type: string;
  flash_attention: string;
}

async function start(t: Test, engine: string, env: Record<string, string> = {}): Promise<TestAppliance> {
  const app = await startEngineAppliance({
    env: { LIA_BACKENDS: `gguf=${engine}`, LIA_NUM_PARALLEL: '1', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '256', ...env },
  });
  t.teardown(() => app.close());
  return app;
}

async function ps(app: TestAppliance, model: string): Promise<PsModel | undefined> {
  return ((await (await app.fetch('/api/ps')).json()) as { models: PsModel[] }).models.find((m) => m.name === `${model}:latest`);
}

/** Tokens generated for a short prompt (the 135M model's weights are random: its text means nothing). */
async function answer(app: TestAppliance, model: string): Promise<string> {
  const res = await ollamaClient(app).generate({ model, prompt: 'Once upon a time', options: { num_predict: 12, temperature: 0 } });
  return 'x'.repeat(res.eval_count ?? 0);
}

for (const engine of ['llama-server', 'llama-cpp']) {
  t.test(`${engine}: a Modelfile's kv_cache_type and flash_attention are loaded and shown`, async (t) => {
    const app = await start(t, engine);
    await createModel(app, 'q8', MODEL, { parameters: { kv_cache_type: 'q8_0' } });
    await createModel(app, 'plain', MODEL);
    await createModel(app, 'nofa', MODEL, { parameters: { kv_cache_type: 'q4_0', flash_attention: false } });
    await createModel(app, 'narrow', NARROW, { parameters: { kv_cache_type: 'q8_0' } });

    const isServer = engine === 'llama-server';
    t.ok((await answer(app, 'q8')).length > 0, 'a q8_0 cache answers');
    t.match(await ps(app, 'q8'), { kv_cache_type: 'q8_0', flash_attention: 'auto' });
    if (isServer) {
      const q8 = await llamaServerArgs(app, 'q8');
      t.equal(q8('--cache-type-k'), 'q8_0');
      t.equal(q8('--cache-type-v'), 'q8_0');
      t.equal(q8('--flash-attn'), 'auto');
    }
    t.ok((await answer(app, 'plain')).length > 0);
    t.match(await ps(app, 'plain'), { kv_cache_type: 'f16', flash_attention: 'auto' }, 'the default is f16, flash attention automatic');
    // The cache of 256 tokens × 30 layers × 192 wide, keys and values: 64 bytes per 32 elements in
    // f16, 34 in q8_0. On node-llama-cpp `size` is the memory llama.cpp reports for the loaded model,
    // on llama-server the engine's estimate: either way q8_0 saves exactly that much.
    const saved = (await ps(app, 'plain'))!.size - (await ps(app, 'q8'))!.size;
    t.equal(saved, (2 * 256 * 30 * 192 * (64 - 34)) / 32, `the q8_0 cache takes ${saved} bytes less than f16`);
    t.ok((await answer(app, 'nofa')).length > 0);
    t.match(await ps(app, 'nofa'), { kv_cache_type: 'f16', flash_attention: 'off' }, 'a quantized cache without flash attention is f16');
    if (isServer) {
      const nofa = await llamaServerArgs(app, 'nofa');
      t.equal(nofa('--flash-attn'), 'off');
      t.equal(nofa('--cache-type-k'), undefined, 'no quantized cache without flash attention');
    }
    t.ok((await answer(app, 'narrow')).length > 0, 'a model whose heads cannot hold q8_0 still loads');
    t.match(await ps(app, 'narrow'), { kv_cache_type: 'f16' }, 'with an f16 cache');
  });
}

t.test('the config default (LIA_KV_CACHE_TYPE) applies to a model that names none; a bad value is a 400', async (t) => {
  const app = await start(t, 'llama-server', { LIA_KV_CACHE_TYPE: 'q4_0', LIA_FLASH_ATTENTION: 'on' });
  await createModel(app, 'dflt', MODEL);
  t.ok((await answer(app, 'dflt')).length > 0);
  t.match(await ps(app, 'dflt'), { kv_cache_type: 'q4_0', flash_attention: 'on' });
  t.equal((await llamaServerArgs(app, 'dflt'))('--cache-type-v'), 'q4_0');

  const res = await app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'dflt', prompt: 'hi', stream: false, options: { kv_cache_type: 'q3_k' } }),
  });
  t.equal(res.status, 400);
  t.match(await res.json(), { error: /kv_cache_type.*f16, q8_0, q4_0/ });
});
