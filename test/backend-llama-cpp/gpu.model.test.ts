/**
 * node-llama-cpp on a GPU, for real, placed by the engine's offload plan as llama-server is: Mesa's
 * lavapipe is a Vulkan device on the CPU, which node-llama-cpp's Vulkan prebuilt (a dependency)
 * uses once `GGML_VK_VISIBLE_DEVICES` names it. A small model goes whole to the device (`/api/ps`
 * `size_vram` and `device`), `num_gpu` splits it or keeps it on the CPU (the CPU-only bindings),
 * and greedy answers are the CPU's. Compared over 16 tokens: node-llama-cpp's Vulkan and CPU
 * prebuilts round differently, and on this model the two first part at a near-tie about 26 tokens
 * in ("she" against "Lily"), where a misplaced layer gives other text from the first tokens.
 */
import { readFile } from 'node:fs/promises';
import t, { type Test } from 'tap';
import type { LlamaCppBackend } from '../../plugins/backend-llama-cpp/backend.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import type { TestAppliance } from '../helpers/appliance.js';

// The runners inherit this process's environment: lavapipe, device 0, is the GPU of this test.
process.env['GGML_VK_VISIBLE_DEVICES'] = '0';

interface Ps {
  models: Array<{ name: string; size: number; size_vram: number; device: string; engine: string }>;
}

const MODEL = 'gguf/tinystories-656k-q8_0.gguf';

async function start(t: Test): Promise<TestAppliance> {
  const app = await startEngineAppliance({
    env: { LIA_BACKENDS: 'gguf=llama-cpp', LIA_NUM_PARALLEL: '1', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '256' },
  });
  t.teardown(() => app.close());
  return app;
}

function runner(app: TestAppliance, model: string): number {
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
  const pid = backend.processes().find((p) => p.model === `${model}:latest`)?.pid;
  if (!pid) throw new Error(`no runner serves ${model}`);
  return pid;
}

async function ps(app: TestAppliance, model: string): Promise<Ps['models'][number] | undefined> {
  return ((await (await app.fetch('/api/ps')).json()) as Ps).models.find((m) => m.name === `${model}:latest`);
}

async function greedy(app: TestAppliance, model: string, numGpu?: number): Promise<string> {
  const answer = await ollamaClient(app).generate({
    model,
    prompt: 'Once upon a time',
    options: { num_predict: 16, temperature: 0, ...(numGpu === undefined ? {} : { num_gpu: numGpu }) },
  });
  return answer.response ?? '';
}

t.test('the plan puts a model that fits whole on the Vulkan device; num_gpu 0 keeps one on the CPU, with the same greedy text', async (t) => {
  const app = await start(t);
  await createModel(app, 'gpu', MODEL);
  await createModel(app, 'cpu', MODEL);
  const onGpu = await greedy(app, 'gpu');
  const gpu = await ps(app, 'gpu');
  t.match(gpu, { engine: 'llama-cpp', device: 'vulkan' }, '/api/ps says where it runs');
  t.ok(gpu && gpu.size_vram > 0 && gpu.size_vram <= gpu.size, `size_vram ${gpu?.size_vram} of ${gpu?.size}`);
  t.match(await readFile(`/proc/${runner(app, 'gpu')}/maps`, 'utf8'), /linux-x64-vulkan\/.*libggml-vulkan\.so/, "node-llama-cpp's Vulkan back end is loaded");

  const onCpu = await greedy(app, 'cpu', 0);
  t.match(await ps(app, 'cpu'), { size_vram: 0, device: 'cpu' }, 'num_gpu 0: the CPU only');
  t.ok(onGpu.length > 0);
  t.equal(onGpu, onCpu, 'greedy decoding gives the same text on the device and on the CPU');
});

t.test('num_gpu splits a model between the device and the CPU', async (t) => {
  const app = await start(t);
  await createModel(app, 'whole', MODEL);
  await createModel(app, 'split', MODEL);
  await greedy(app, 'whole');
  await greedy(app, 'split', 1);
  const whole = await ps(app, 'whole');
  const split = await ps(app, 'split');
  t.equal(split?.device, 'vulkan');
  t.ok(
    whole && split && split.size_vram > 0 && split.size_vram < whole.size_vram,
    `one layer on the device holds less than the whole model: ${split?.size_vram} of ${whole?.size_vram}`,
  );
});
