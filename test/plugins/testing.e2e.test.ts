/**
 * `lia/testing` as a plugin author uses it: an appliance with the fake backend instead of the
 * real ones, a fake model created through the store's API, and the engine's routes answering
 * predictably through it (generate, chat, embed, `/v1/chat/completions`, `num_predict`, queueing
 * of concurrent requests); the helper's `fetch` sends the key and trusts the CA; the custom-hook
 * example of docs/plugins.md (test/fixtures/plugins/greetings) runs.
 */
import path from 'node:path';
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance, uploadBlob, type TestAppliance } from 'lia/testing';
import { ROOT } from '../helpers/fixtures.js';

const PLUGINS = {
  'backend-llama-cpp': false,
  'backend-transformers': false,
  'host-gpu': false,
  'host-services': false,
  webui: false,
  'fake-backend': FAKE_BACKEND,
} as const;

async function post(app: TestAppliance, pathname: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await app.fetch(pathname, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

t.test('the fake backend answers through the engine’s routes', async (t) => {
  const app = await startTestAppliance({ plugins: PLUGINS });
  t.teardown(app.close);
  t.match(app.url, /^https:\/\/localhost:\d+$/);
  t.match(app.key, /^lia_/);
  t.match(app.ca, /BEGIN CERTIFICATE/);
  t.equal(app.appliance.plugins.find((p) => p.spec.name === 'fake-backend')?.origin, FAKE_BACKEND.module);

  await createFakeModel(app, 'parrot', 'parrot says:');
  const tags = await (await app.fetch('/api/tags')).json();
  t.match(tags, { models: [{ name: 'parrot:latest', details: { format: 'fake', family: 'fake', parameter_size: '2' } }] });

  const gen = await post(app, '/api/generate', { model: 'parrot', prompt: 'hello there', stream: false });
  t.equal(gen.status, 200);
  t.match(gen.body, { response: 'parrot says: hello there', done: true, done_reason: 'stop', prompt_eval_count: 2, eval_count: 4 });
  const cut = await post(app, '/api/generate', { model: 'parrot', prompt: 'hello there', stream: false, options: { num_predict: 3 } });
  t.match(cut.body, { response: 'parrot says: hello', done_reason: 'length' });

  const chat = await post(app, '/api/chat', {
    model: 'parrot',
    stream: false,
    messages: [
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'second' },
    ],
  });
  t.match(chat.body, { message: { role: 'assistant', content: 'parrot says: second' }, done: true });

  const embed = await post(app, '/api/embed', { model: 'parrot', input: ['a', 'b', 'a'] });
  t.equal(embed.status, 200);
  const [a, b, a2] = embed.body.embeddings as number[][];
  t.equal(a!.length, 8);
  t.same(a, a2, 'equal inputs, equal vectors');
  t.not(JSON.stringify(a), JSON.stringify(b));
  t.ok(Math.abs(Math.hypot(...a!) - 1) < 1e-6, 'unit vectors');

  const openai = await post(app, '/v1/chat/completions', { model: 'parrot', messages: [{ role: 'user', content: 'ping' }] });
  t.equal(openai.status, 200);
  t.match(openai.body, { object: 'chat.completion', choices: [{ message: { role: 'assistant', content: 'parrot says: ping' }, finish_reason: 'stop' }] });

  // Concurrent requests all get their own answer.
  const many = await Promise.all(Array.from({ length: 6 }, (_, i) => post(app, '/api/generate', { model: 'parrot', prompt: `n${i}`, stream: false })));
  t.same(
    many.map((r) => r.body.response),
    Array.from({ length: 6 }, (_, i) => `parrot says: n${i}`),
  );
});

t.test('the helper’s fetch sends the key unless told not to; bad fake models are refused; a hook of one’s own', async (t) => {
  const greetings = { module: path.join(ROOT, 'test/fixtures/plugins/greetings/index.ts') };
  const app = await startTestAppliance({ plugins: { ...PLUGINS, 'api-openai': false, 'api-anthropic': false, greetings } });
  t.teardown(app.close);
  t.same(await (await app.fetch('/api/greetings')).json(), { greetings: [{ name: 'default', text: 'hello' }] }, 'the docs’ custom-hook example runs');
  t.same(app.hooks.extensions.names().slice(-1), ['greetings'], 'its own hook beside the built-in plugins’');
  t.ok(app.hooks.extensions.names().includes('inference'), 'the built-in services are extensions too');
  t.equal((await app.fetch('/api/tags')).status, 200);
  const anonymous = await app.fetch('/api/tags', { auth: false });
  t.equal(anonymous.status, 401);
  t.match(await anonymous.json(), { error: /missing API key/ });

  const digest = await uploadBlob(app, 'x');
  const two = await post(app, '/api/create', { model: 'two', files: { 'a.fake': digest, 'b.fake': digest }, stream: false });
  t.equal(two.status, 400);
  t.same(two.body, { error: 'a fake model is exactly one .fake file' });
  await t.rejects(createFakeModel(app, 'Bad Name!'), /creating the fake model "Bad Name!": HTTP 400/);
});
