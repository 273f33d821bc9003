/**
 * llama-server on a GPU, for real: Mesa's lavapipe is a Vulkan device on the CPU, which llama.cpp
 * uses once `GGML_VK_VISIBLE_DEVICES` names it, with node-llama-cpp's Vulkan back end (a
 * dependency) loaded into LIA's own llama-server. The engine's offload plan puts a small model
 * whole on the device (`/api/ps` `size_vram` is what it placed, `lia ps` says GPU), `num_gpu`
 * splits it, greedy answers are the CPU's, a device cap makes a second model evict the first, a
 * server killed mid-stream ends the stream with an error and the model comes back on the device,
 * and the server really loaded the Vulkan library and took the plan's arguments.
 */
import { readFile } from 'node:fs/promises';
import t, { type Test } from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import { llamaServerArgs, llamaServerPid, requireLlamaServer } from '../helpers/engines.js';
import type { TestAppliance } from '../helpers/appliance.js';

requireLlamaServer();
// The servers inherit this process's environment: lavapipe, device 0, is the GPU of this test.
process.env['GGML_VK_VISIBLE_DEVICES'] = '0';

interface Ps {
  models: Array<{ name: string; size: number; size_vram: number; device: string }>;
}

const MiB = 2 ** 20;
const MODEL = 'gguf/tinystories-656k-q8_0.gguf';

async function start(t: Test, env: Record<string, string> = {}): Promise<TestAppliance> {
  const app = await startEngineAppliance({
    env: { LIA_BACKENDS: 'gguf=llama-server', LIA_NUM_PARALLEL: '1', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '256', ...env },
  });
  t.teardown(() => app.close());
  return app;
}

async function ps(app: TestAppliance): Promise<Ps['models']> {
  return ((await (await app.fetch('/api/ps')).json()) as Ps).models;
}

async function greedy(app: TestAppliance, model: string, numGpu?: number): Promise<string> {
  const answer = await ollamaClient(app).generate({
    model,
    prompt: 'Once upon a time',
    options: { num_predict: 24, temperature: 0, ...(numGpu === undefined ? {} : { num_gpu: numGpu }) },
  });
  return answer.response ?? '';
}

t.test('a model that fits goes whole to the Vulkan device, and answers as on the CPU', async (t) => {
  const app = await start(t);
  await createModel(app, 'gpu', MODEL);
  await createModel(app, 'cpu', MODEL);
  const onGpu = await greedy(app, 'gpu');
  const pid = llamaServerPid(app, 'gpu');
  const arg = await llamaServerArgs(app, 'gpu');
  t.equal(arg('--device'), 'Vulkan0', 'the plan named the device');
  t.equal(arg('--n-gpu-layers'), '3', 'both layers and the output layer');
  const environ = (await readFile(`/proc/${pid}/environ`, 'utf8')).split('\0');
  t.ok(
    environ.some((e) => /^GGML_BACKEND_PATH=.*linux-x64-vulkan\/libggml-vulkan\.so$/.test(e)),
    "node-llama-cpp's Vulkan back end is the one loaded",
  );
  t.match(await readFile(`/proc/${pid}/maps`, 'utf8'), /libggml-vulkan\.so/, 'and the process has it mapped');
  const [gpu] = (await ps(app)).filter((m) => m.name === 'gpu:latest');
  t.equal(gpu?.device, 'Vulkan0', '/api/ps says where it runs');
  t.ok(gpu && gpu.size_vram > 0 && gpu.size_vram <= gpu.size, `size_vram ${gpu?.size_vram} of ${gpu?.size}`);

  const onCpu = await greedy(app, 'cpu', 0);
  t.equal((await llamaServerArgs(app, 'cpu'))('--device'), 'none', 'num_gpu 0: the CPU only');
  t.match(
    (await ps(app)).find((m) => m.name === 'cpu:latest'),
    { size_vram: 0, device: 'cpu' },
  );
  t.ok(onGpu.length > 0);
  t.equal(onGpu, onCpu, 'greedy decoding gives the same text on the device and on the CPU');
});

t.test('num_gpu splits a model between the device and the CPU', async (t) => {
  const app = await start(t);
  await createModel(app, 'split', MODEL);
  await greedy(app, 'split', 1);
  t.equal((await llamaServerArgs(app, 'split'))('--n-gpu-layers'), '1');
  const [m] = await ps(app);
  t.ok(m && m.size_vram > 0 && m.size_vram < m.size, `part of it on the device: ${m?.size_vram} of ${m?.size}`);
});

t.test('a device cap that holds one model: the next one evicts the idle first', async (t) => {
  // The whole model takes about 4 MiB of the device: its weights, its cache and the compute buffer of a 256-token batch.
  const app = await start(t, { LIA_GPU_MEMORY_CAP: String(5 * MiB), LIA_GPU_RESERVE: '0' });
  await createModel(app, 'first', MODEL);
  await createModel(app, 'second', MODEL);
  await greedy(app, 'first');
  const first = (await ps(app)).find((m) => m.name === 'first:latest');
  t.ok(first && first.size_vram > 0, 'the first model is on the device');
  t.ok(first && first.size_vram <= 5 * MiB && 2 * first.size_vram > 5 * MiB, `one fits the cap, two do not (${first?.size_vram} B each)`);
  await greedy(app, 'second');
  const models = await ps(app);
  t.same(
    models.map((m) => m.name),
    ['second:latest'],
    'the first was unloaded to make room on the device',
  );
  t.ok(models[0]!.size_vram > 0, 'and the second went to the device');
});

t.test('a server killed mid-stream on the device: a clean error frame, then the model is back on the device', async (t) => {
  const app = await start(t);
  await createModel(app, 'killed', MODEL);
  await greedy(app, 'killed');
  const pid = llamaServerPid(app, 'killed');
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'killed', prompt: 'Once upon a time', options: { num_predict: 4096, temperature: 0 } }),
  });
  t.equal(res.status, 200);
  const reader = res.body!.getReader();
  const first = await reader.read();
  t.notOk(first.done, 'tokens are streaming');
  process.kill(pid, 'SIGKILL');
  let text = new TextDecoder().decode(first.value);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const last = JSON.parse(text.trim().split('\n').at(-1)!) as { error?: string; done?: boolean };
  t.match(last, { error: /./ }, `the stream ends with an error frame: ${JSON.stringify(last)}`);
  t.ok((await greedy(app, 'killed')).length > 0, 'the next request is answered');
  t.not(llamaServerPid(app, 'killed'), pid, 'by a new server');
  t.equal((await llamaServerArgs(app, 'killed'))('--device'), 'Vulkan0', 'on the device again');
  t.ok((await ps(app)).find((m) => m.name === 'killed:latest')!.size_vram > 0);
});
