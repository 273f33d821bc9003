/**
 * The plugin's options reach the backend from the config and the environment, and bad values
 * stop the appliance at start with a message that names the key.
 */
import t, { type Test } from 'tap';
import { startTestAppliance, type TestApplianceOptions } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { createTransformersBackend } from '../../plugins/backend-transformers/backend.js';

const UNUSED = { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } as const;

/** Sets plugin env variables for one start (plugins read `process.env`), then restores them. */
async function withEnv<T>(vars: Record<string, string>, run: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await run();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** Asserts that the start fails with `re`; closes the appliance if it started after all. */
async function startFails(t: Test, options: TestApplianceOptions, re: RegExp): Promise<void> {
  try {
    const app = await startTestAppliance(options);
    await app.close();
    t.fail(`the appliance started; expected an error matching ${re}`);
  } catch (err) {
    t.match((err as Error).message, re);
  }
}

t.test('LIA_ONNX_DTYPE=q8 runs the quantized weights', async (t) => {
  const app = await withEnv({ LIA_ONNX_DTYPE: 'q8' }, () => startTestAppliance({ plugins: { ...UNUSED } }));
  t.teardown(() => app.close());
  await createModel(app, 'minilm', 'onnx/tiny-random-minilm');
  const res = await app.fetch('/api/embed', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'minilm', input: 'hello' }),
  });
  t.equal(res.status, 200);
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; size: number }[] };
  const size = ps.models.find((m) => m.name === 'minilm:latest')?.size ?? 0;
  const resolved = await app.hooks.extensions.get('models').resolve('minilm');
  const load = { parallel: 1, threads: 1 };
  const estimate = await app.hooks.extensions.get('backends').forFormat('onnx').estimateMemory(resolved, load);
  t.equal(size, estimate.totalBytes, '/api/ps shows the estimate');
  // The same folder sized with the default (fp32) choice.
  const fp32 = createTransformersBackend({ dtype: 'auto', threads: 0, maxBatchTokens: 4096, memoryArena: true });
  const fp32Size = (await fp32.estimateMemory(resolved, load)).totalBytes;
  t.ok(size < fp32Size, `q8 (${size}) is smaller than fp32 (${fp32Size})`);
});

t.test('bad options stop the start with the key named', async (t) => {
  await startFails(t, { plugins: { ...UNUSED, 'backend-transformers': { options: { dtype: 'fp64' } } } }, /plugins\.backend-transformers\.options\.dtype/);
  await withEnv({ LIA_ONNX_MAX_BATCH_TOKENS: '10' }, () => startFails(t, { plugins: { ...UNUSED } }, /plugins\.backend-transformers\.options\.maxBatchTokens/));
  await startFails(
    t,
    { plugins: { ...UNUSED, 'backend-transformers': { options: { batch: 3 } } } },
    /unknown key "plugins\.backend-transformers\.options\.batch"/,
  );
});
