/**
 * Round 3 of the outside sweep (docs/security.md), the findings a client reaches over HTTPS with
 * the fake backend: engine options that size an allocation are bounded (a 400 naming the option
 * and its limit), an allow-list pattern of many stars matches in linear time (a near miss
 * answers), and allow-lists compare names as the store does (case-insensitively, `:latest`
 * included).
 */
import { createHash } from 'node:crypto';
import t from 'tap';
import { createFakeModel, startTestAppliance } from '../../core/testing/index.js';
import { fakeBackendOnly } from '../helpers/plugin-sets.js';

const app = await startTestAppliance({
  listen: false,
  plugins: fakeBackendOnly(),
});
t.teardown(() => app.close());
await createFakeModel(app, 'stories', 'once upon');
await createFakeModel(app, 'secret', 'the secret weights say:');

const json = { 'content-type': 'application/json' };
const as = (key: string | null) => ({ ...json, ...(key ? { authorization: `Bearer ${key}` } : {}) });
const post = (path: string, body: object, key: string | null = app.key) => app.fetch(path, { method: 'POST', headers: as(key), body: JSON.stringify(body) });

async function create(body: object, key: string = app.key): Promise<{ key: string }> {
  const res = await post('/system/api-keys', body, key);
  if (res.status !== 201) throw new Error(`creating a key: ${res.status} ${await res.text()}`);
  return (await res.json()) as { key: string };
}

t.test('repeat_last_n and stop are bounded on every surface: a 400 naming the option and the limit', async (t) => {
  for (const n of [268_435_456, 2 ** 31 - 1, -2]) {
    const res = await post('/api/generate', { model: 'stories', prompt: 'hi', stream: false, options: { repeat_last_n: n } });
    t.equal(res.status, 400, `repeat_last_n ${n}`);
    t.same(await res.json(), { error: 'option "repeat_last_n" must be between -1 and 131072' });
  }
  const chat = await post('/api/chat', {
    model: 'stories',
    stream: false,
    messages: [{ role: 'user', content: 'hi' }],
    options: { repeat_last_n: 2 ** 31 - 1 },
  });
  t.equal(chat.status, 400);
  await chat.arrayBuffer();
  const whole = await post('/api/generate', { model: 'stories', prompt: 'hi', stream: false, options: { repeat_last_n: -1 } });
  t.equal(whole.status, 200, '-1 (the whole context) is fine');
  await whole.arrayBuffer();

  const stops = Array.from({ length: 65 }, (_, i) => `s${i}`);
  const ollama = await post('/api/generate', { model: 'stories', prompt: 'hi', stream: false, options: { stop: stops } });
  t.equal(ollama.status, 400);
  t.match(await ollama.json(), { error: 'option "stop" takes at most 64 strings of at most 1024 characters' });
  const openai = await post('/v1/chat/completions', { model: 'stories', messages: [{ role: 'user', content: 'hi' }], stop: stops });
  t.equal(openai.status, 400);
  t.match(await openai.json(), { error: { type: 'invalid_request_error', param: /stop/ } });
  const long = await post('/v1/messages', { model: 'stories', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], stop_sequences: ['x'.repeat(1025)] });
  t.equal(long.status, 400);
  t.match(await long.json(), { type: 'error', error: { type: 'invalid_request_error' } });
});

t.test('an allow-list pattern of many stars answers a near miss at once', async (t) => {
  const { key: admin } = await create({ name: 'restricted-admin', scopes: ['keys:admin', 'inference', 'models:read'], models: ['stories*'] });
  const pattern = `stories${'*a'.repeat(16)}*b`;
  const { key } = await create({ name: 'many-stars', scopes: ['inference', 'models:read'], models: [pattern] }, admin);
  const res = await post('/api/show', { model: `stories${'a'.repeat(60)}` }, key);
  t.equal(res.status, 403, 'refused: the name is outside the allow-list');
  await res.arrayBuffer();
  const health = await app.fetch('/health', { auth: false });
  t.equal(health.status, 200, 'the appliance answers');
  await health.arrayBuffer();
});

t.test('an allow-list compares names as the store does: Stories:Latest is stories', async (t) => {
  const { key } = await create({ name: 'stories-only', scopes: ['inference'], models: ['stories'] });
  for (const model of ['stories', 'Stories', 'Stories:Latest', 'STORIES:latest']) {
    const res = await post('/api/generate', { model, prompt: 'hi', stream: false }, key);
    t.equal(res.status, 200, model);
    await res.arrayBuffer();
  }
});

t.test("a key's allow-list covers the blobs of the models outside it: no create from them, no HEAD oracle", async (t) => {
  const { key } = await create({ name: 'stories-writer', scopes: ['inference', 'models:write', 'models:read'], models: ['stories*'] });
  const bytes = 'the secret weights say:';
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const head = (k: string) => app.fetch(`/api/blobs/${digest}`, { method: 'HEAD', headers: { authorization: `Bearer ${k}` } });
  t.equal((await head(app.key)).status, 200, 'the blob is in the store');
  t.equal((await head(key)).status, 404, "to the restricted key, another model's blob is not there");

  const made = await post('/api/create', { model: 'stories-x', files: { 'model.fake': digest }, stream: false }, key);
  t.equal(made.status, 403);
  t.match(await made.json(), { error: /may not use blob sha256:[0-9a-f]{64} \("files\.model\.fake"\): it belongs to models outside the key's allow-list/ });
  const generate = await post('/api/generate', { model: 'stories-x', prompt: 'hi', stream: false }, key);
  t.equal(generate.status, 404, 'no model was made');
  await generate.arrayBuffer();

  const wrong = await app.fetch(`/api/blobs/${digest}`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: 'other bytes' });
  t.equal(wrong.status, 400, 'bytes that do not match the digest prove nothing');
  await wrong.arrayBuffer();
  t.equal((await head(key)).status, 404);

  // Sending the bytes themselves proves the key holds them: then the model may be made.
  const upload = await app.fetch(`/api/blobs/${digest}`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: bytes });
  t.equal(upload.status, 200);
  await upload.arrayBuffer();
  t.equal((await head(key)).status, 200);
  const own = await post('/api/create', { model: 'stories-x', files: { 'model.fake': digest }, stream: false }, key);
  t.equal(own.status, 200, await own.text());
  const own200 = await post('/api/generate', { model: 'stories-x', prompt: 'hi', stream: false }, key);
  t.equal(own200.status, 200);
  await own200.arrayBuffer();
});
