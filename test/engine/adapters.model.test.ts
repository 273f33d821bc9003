/**
 * LoRA adapters (issue 43, item 1), on both GGUF engines, as a user makes and uses them: a model
 * created `FROM` a base with `adapters` (the Modelfile's `ADAPTER`, uploaded as a blob), listed
 * with its parent, shown with its `ADAPTER` line, answering otherwise than its base, and with
 * llama-server's per-request `lora` field sent by the `openai` client. On llama-server the base
 * and every model that only adds adapters to it share one loaded server (no reload between them,
 * as vLLM serves its LoRA modules); node-llama-cpp applies adapters at load, so each is a load of
 * its own and a per-request scale is a 400 that says so. An adapter for another architecture, or
 * a file that is no adapter, is a 400 naming the problem.
 */
import t, { type Test } from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { TINY_LORA_BASE } from '../../scripts/fixtures/tiny-lora.js';
import { fixture } from '../helpers/fixtures.js';
import { createModel, uploadBlob } from '../helpers/models.js';
import { llamaServerArgs, llamaServerPid, requireLlamaServer } from '../helpers/engines.js';
import { openaiFixture, type OpenAIFixture } from '../api-openai/openai-client.js';
import type { TestAppliance } from '../helpers/appliance.js';

requireLlamaServer();

const PROMPT = 'Once upon a time';

async function createWithAdapters(app: TestAppliance, name: string, adapters: Record<string, string>): ReturnType<TestAppliance['fetch']> {
  const uploaded: Record<string, string> = {};
  for (const [file, path] of Object.entries(adapters)) uploaded[file] = await uploadBlob(app, path);
  return app.fetch('/api/create', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: name, from: 'base', adapters: uploaded, stream: false }),
  });
}

/** A greedy completion through the `openai` client, with llama-server's `lora` field when given. */
async function complete(f: OpenAIFixture, model: string, lora?: Array<{ id: number; scale: number }>): Promise<string> {
  const body = { model, prompt: PROMPT, max_tokens: 16, temperature: 0, ...(lora ? { lora } : {}) };
  const res = await f.client.completions.create(body as Parameters<OpenAIFixture['client']['completions']['create']>[0] & { stream?: false });
  return res.choices[0]!.text;
}

async function loaded(app: TestAppliance): Promise<string[]> {
  return ((await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string }> }).models.map((m) => m.name).sort();
}

async function setUp(t: Test, engine: string): Promise<OpenAIFixture & { a: string; b: string }> {
  const [a, b] = await Promise.all([builtFixture('tiny-lora-a.gguf'), builtFixture('tiny-lora-b.gguf')]);
  const f = await openaiFixture(t, {}, {}, { LIA_BACKENDS: `gguf=${engine}`, LIA_NUM_PARALLEL: '2', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '256' });
  await createModel(f.app, 'base', TINY_LORA_BASE);
  for (const [name, file] of [
    ['tuned-a', a],
    ['tuned-b', b],
  ] as const) {
    const res = await createWithAdapters(f.app, name, { [`${name}.gguf`]: file });
    t.equal(res.status, 200, `${name} is created: ${await res.text()}`);
  }
  return { ...f, a, b };
}

for (const engine of ['llama-server', 'llama-cpp']) {
  t.test(`${engine}: a model with an adapter answers otherwise than its base, and is listed and shown as one`, async (t) => {
    const f = await setUp(t, engine);
    const { app } = f;
    const base = await complete(f, 'base');
    const tunedA = await complete(f, 'tuned-a');
    const tunedB = await complete(f, 'tuned-b');
    t.not(tunedA, base, `the adapter changes the greedy answer (base ${JSON.stringify(base)}, tuned-a ${JSON.stringify(tunedA)})`);
    t.not(tunedB, tunedA, 'another adapter, another answer');
    t.equal(await complete(f, 'tuned-a'), tunedA, 'the same answer again');

    const models = await f.client.models.list();
    const listed = new Map(models.data.map((m) => [m.id, (m as unknown as { parent?: string | null }).parent]));
    t.equal(listed.get('tuned-a:latest'), 'base:latest', '/v1/models names the parent of a model with an adapter');
    t.equal(listed.get('base:latest'), undefined, 'and none for the base');
    const tags = (await (await app.fetch('/api/tags')).json()) as { models: Array<{ name: string; details: { parent_model: string } }> };
    t.equal(tags.models.find((m) => m.name === 'tuned-a:latest')?.details.parent_model, 'base:latest', '/api/tags too');
    const show = (await (await app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'tuned-a' }) })).json()) as { modelfile: string };
    t.match(show.modelfile, /^ADAPTER \S+sha256-[0-9a-f]{64}$/m, "/api/show's Modelfile has the ADAPTER line");

    if (engine === 'llama-server') {
      t.equal(await complete(f, 'tuned-a', [{ id: 0, scale: 0 }]), base, 'at scale 0 the adapter model answers as its base');
      t.equal(await complete(f, 'tuned-a', [{ id: 0, scale: 1 }]), tunedA, 'at scale 1 as itself');
      t.same(await loaded(app), ['base:latest'], 'the base and both adapter models share one loaded base');
      const pid = llamaServerPid(app, 'base');
      for (const model of ['tuned-b', 'tuned-a', 'base', 'tuned-b']) await complete(f, model);
      t.equal(llamaServerPid(app, 'base'), pid, 'switching between the adapters reloads nothing');
      const lora = (await llamaServerArgs(app, 'base'))('--lora-scaled')?.split(',') ?? [];
      t.equal(lora.length, 2, 'the server holds both adapters');
      t.ok(
        lora.every((l) => l.endsWith(':0')),
        'each off until a request names it',
      );
    } else {
      t.same(await loaded(app), ['base:latest', 'tuned-a:latest', 'tuned-b:latest'], 'node-llama-cpp loads each adapter model with its own context');
      const res = await app.fetch('/v1/completions', {
        method: 'POST',
        body: JSON.stringify({ model: 'tuned-a', prompt: PROMPT, max_tokens: 4, lora: [{ id: 0, scale: 0 }] }),
      });
      t.equal(res.status, 400, 'a per-request scale is refused where the engine applies adapters at load');
      t.match(((await res.json()) as { error: { message: string } }).error.message, /applies LoRA adapters when it loads the model.*llama-server/);
    }

    const beyond = await app.fetch('/v1/completions', {
      method: 'POST',
      body: JSON.stringify({ model: 'tuned-a', prompt: PROMPT, lora: [{ id: 3, scale: 1 }] }),
    });
    t.equal(beyond.status, 400, 'a lora id the model does not have is a 400');
    t.match(((await beyond.json()) as { error: { message: string } }).error.message, /lora id 3: "tuned-a" has 1 LoRA adapter \(ids 0 to 0\)/);
    const noAdapters = await app.fetch('/v1/completions', {
      method: 'POST',
      body: JSON.stringify({ model: 'base', prompt: PROMPT, lora: [{ id: 0, scale: 1 }] }),
    });
    t.equal(noAdapters.status, 400);
    t.match(((await noAdapters.json()) as { error: { message: string } }).error.message, /"base" has no LoRA adapters/);
    await f.conforms(t);
  });
}

t.test('an adapter for another architecture, or a file that is no adapter, is a 400 naming the problem', async (t) => {
  const f = await openaiFixture(t, { base: TINY_LORA_BASE });
  const other = await createWithAdapters(f.app, 'wrong', { 'qwen3-lora.gguf': await builtFixture('tiny-lora-qwen3.gguf') });
  t.equal(other.status, 400);
  t.match(((await other.json()) as { error: string }).error, /adapter "qwen3-lora.gguf": it is for the qwen3 architecture, and the model's weights are llama/);
  const weights = await createWithAdapters(f.app, 'wrong', { 'weights.gguf': fixture(TINY_LORA_BASE) });
  t.equal(weights.status, 400);
  t.match(((await weights.json()) as { error: string }).error, /adapter "weights.gguf": not a GGUF LoRA adapter/);
  const missing = await f.app.fetch('/api/create', {
    method: 'POST',
    body: JSON.stringify({ model: 'wrong', from: 'base', adapters: { 'x.gguf': `sha256:${'0'.repeat(64)}` } }),
  });
  t.equal(missing.status, 400);
  t.match(((await missing.json()) as { error: string }).error, /blob sha256:0{64} for adapter "x.gguf" is not in the store/);
  const tags = (await (await f.app.fetch('/api/tags')).json()) as { models: Array<{ name: string }> };
  t.same(
    tags.models.map((m) => m.name),
    ['base:latest'],
    'nothing was created',
  );
});
