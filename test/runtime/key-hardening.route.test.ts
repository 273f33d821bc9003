/**
 * Attacks by a restricted key, as a client makes them over HTTPS, each refused: minting or rotating
 * a key broader than itself (scopes, models, limits, expiry; the master key), leaving its model
 * allow-list through copy, create, pull, push, delete, show and the listings, spending more than
 * `tokens_per_minute` with parallel requests, keeping a stream after revocation or rotation, and
 * using `x-api-key` outside the Anthropic routes or next to a different Bearer key.
 */
import t from 'tap';
import { createFakeModel, startTestAppliance } from '../../core/testing/index.js';
import { readUntil } from '../helpers/stream-reader.js';
import { fakeBackendOnly } from '../helpers/plugin-sets.js';

// Words 50 ms apart: a stream of the long prompt below runs for seconds, while the test acts.
const app = await startTestAppliance({
  listen: false,
  plugins: fakeBackendOnly({ tokenDelayMs: 50 }),
});
t.teardown(() => app.close());
await createFakeModel(app, 'stories', 'once upon');
await createFakeModel(app, 'crash', 'crash says:');

const json = { 'content-type': 'application/json' };
const as = (key: string | null) => ({ ...json, ...(key ? { authorization: `Bearer ${key}` } : {}) });
const post = (path: string, key: string | null, body: object) => app.fetch(path, { method: 'POST', headers: as(key), body: JSON.stringify(body) });

async function create(body: object, key: string | null = null): Promise<{ key: string }> {
  const res = await post('/system/api-keys', key, body);
  if (res.status !== 201) throw new Error(`creating a key: ${res.status} ${await res.text()}`);
  return (await res.json()) as { key: string };
}
const inAnHour = new Date(Date.now() + 3600_000).toISOString();
const LONG = Array.from({ length: 80 }, (_, i) => `word${i}`).join(' ');

t.test('a restricted key creates and rotates only keys no broader than itself', async (t) => {
  const limits = { requests_per_minute: 100, tokens_per_minute: 100_000, concurrent_streams: 5 };
  const { key: admin } = await create({ name: 'restricted-admin', scopes: ['keys:admin', 'inference'], models: ['stories*'], limits, expires_at: inAnHour });
  const within = { scopes: ['inference'], models: ['stories-*'], limits: { ...limits, requests_per_minute: 10 }, expires_at: inAnHour };
  const attempts: Array<[string, object, RegExp]> = [
    ['no allow-list', { ...within, models: null }, /broader in models: it would use every model/],
    ['a pattern not provably inside', { ...within, models: ['stor*'] }, /models: "stor\*" is not provably inside/],
    ['no limits', { ...within, limits: null }, /limits: it would have no requests_per_minute/],
    ['a larger limit', { ...within, limits: { ...limits, tokens_per_minute: 200_000 } }, /limits: its tokens_per_minute 200000 is above/],
    ['no expiry', { ...within, expires_at: null }, /expires_at: it would never expire/],
    ['a later expiry', { ...within, expires_at: new Date(Date.now() + 7200_000).toISOString() }, /expires_at: it would expire at/],
    ['a scope it lacks', { ...within, scopes: ['system:admin'] }, /scopes: it would hold "system:admin"/],
  ];
  for (const [what, spec, message] of attempts) {
    const res = await post('/system/api-keys', admin, { name: 'escalated', ...spec });
    t.equal(res.status, 403, `${what}: 403`);
    t.match(await res.json(), { error: message }, `${what}: the 403 names the dimension`);
  }
  const child = await post('/system/api-keys', admin, { name: 'child', ...within });
  t.equal(child.status, 201, 'a key inside it in every dimension is created');
  const { key: childKey } = (await child.json()) as { key: string };
  const gen = await post('/api/generate', childKey, { model: 'crash', prompt: 'hi', stream: false });
  t.equal(gen.status, 403, 'and it cannot generate with a model outside its list');

  const rotatedChild = await app.fetch('/system/api-keys/child/rotate', { method: 'POST', headers: as(admin) });
  t.equal(rotatedChild.status, 200, 'it rotates a key no broader than itself');
  await create({ name: 'operator', scopes: ['system:admin', 'keys:admin'] });
  const rotateBroader = await app.fetch('/system/api-keys/operator/rotate', { method: 'POST', headers: as(admin) });
  t.equal(rotateBroader.status, 403, 'it cannot rotate (and so learn the secret of) a broader key');
  t.match(await rotateBroader.json(), { error: /scopes: it would hold "system:admin"/ });
  const rotateMaster = await app.fetch('/system/api-keys/rotate', { method: 'POST', headers: as(admin) });
  t.equal(rotateMaster.status, 403, 'it cannot rotate the master key');
  t.match(await rotateMaster.json(), { error: /system:admin/ });
  t.equal((await app.fetch('/api/tags')).status, 200, 'the master key still works');
});

t.test('a key’s model allow-list holds on every route that names a model', async (t) => {
  const { key } = await create({ name: 'stories-writer', scopes: ['inference', 'models:write'], models: ['stories*'] });
  const refused: Array<[string, string, object]> = [
    ['copy from a model outside the list', '/api/copy', { source: 'crash', destination: 'stories-evil' }],
    ['copy over a model outside the list', '/api/copy', { source: 'stories', destination: 'crash' }],
    ['create from a model outside the list', '/api/create', { model: 'stories-from', from: 'crash', stream: false }],
    ['create a name outside the list', '/api/create', { model: 'crash-2', from: 'stories', stream: false }],
    ['show', '/api/show', { model: 'crash' }],
    ['pull to a name outside the list', '/api/pull', { model: 'crash-pulled', stream: false }],
    ['push', '/api/push', { model: 'crash', stream: false }],
  ];
  for (const [what, path, body] of refused) {
    const res = await post(path, key, body);
    t.equal(res.status, 403, `${what}: 403`);
    t.match(await res.json(), { error: /may not use the model "crash/ }, `${what}: names the model`);
  }
  const del = await app.fetch('/api/delete', { method: 'DELETE', headers: as(key), body: JSON.stringify({ model: 'crash' }) });
  t.equal(del.status, 403, 'delete of a model outside the list: 403');
  t.equal((await post('/api/show', null, { model: 'crash' })).status, 200, 'the model is still there for the master key');
  t.equal((await post('/api/generate', key, { model: 'stories-evil', prompt: 'hi', stream: false })).status, 404, 'no copy was made');

  t.equal((await post('/api/copy', key, { source: 'stories', destination: 'stories-copy' })).status, 200, 'a copy inside the list works');
  t.equal((await post('/api/show', key, { model: 'stories-copy' })).status, 200, 'and shows');

  // The master key loads "crash"; the key must not learn of it anywhere.
  const loaded = await post('/api/generate', null, { model: 'crash', prompt: 'hi', stream: false });
  t.equal(loaded.status, 200);
  await loaded.text();
  const names = (list: Array<{ name?: string; id?: string }>) => list.map((m) => m.name ?? m.id ?? '');
  const tags = (await (await app.fetch('/api/tags', { headers: as(key) })).json()) as { models: Array<{ name: string }> };
  t.same(
    names(tags.models).filter((n) => !/^stories/.test(n)),
    [],
    '/api/tags lists only its models',
  );
  t.ok(names(tags.models).length >= 2, '/api/tags lists its models');
  const v1 = (await (await app.fetch('/v1/models', { headers: as(key) })).json()) as { data: Array<{ id: string }> };
  t.same(
    names(v1.data).filter((n) => !/^stories/.test(n)),
    [],
    '/v1/models lists only its models',
  );
  t.equal((await app.fetch('/v1/models/crash', { headers: as(key) })).status, 404, '/v1/models/{outside} is a 404, as if absent');
  t.equal((await app.fetch('/v1/models/stories', { headers: as(key) })).status, 200, '/v1/models/{inside} answers');
  const ps = (await (await app.fetch('/api/ps', { headers: as(key) })).json()) as { models: Array<{ name: string }> };
  const masterPs = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string }> };
  t.ok(
    names(masterPs.models).some((n) => n.startsWith('crash')),
    'the master key sees "crash" loaded',
  );
  t.same(
    names(ps.models).filter((n) => !/^stories/.test(n)),
    [],
    '/api/ps shows only its models',
  );
});

t.test('tokens_per_minute bounds parallel requests; Retry-After is when the budget is back', async (t) => {
  const { key } = await create({ name: 'tpm', scopes: ['inference'], limits: { tokens_per_minute: 100 } });
  const prompt = 'tell me a story about a brave little robot who sails the sea';
  const answers = await Promise.all(Array.from({ length: 50 }, () => post('/api/generate', key, { model: 'stories', prompt, stream: false })));
  let spent = 0;
  let admitted = 0;
  const waits: number[] = [];
  for (const res of answers) {
    if (res.status === 200) {
      const body = (await res.json()) as { prompt_eval_count: number; eval_count: number };
      spent += body.prompt_eval_count + body.eval_count;
      admitted++;
    } else {
      t.equal(res.status, 429, 'a refusal is a 429');
      waits.push(Number(res.headers.get('retry-after')));
      await res.text();
    }
  }
  t.ok(admitted >= 1, 'some are admitted');
  t.ok(spent <= 100, `the key spent ${spent} tokens of its 100 per minute`);
  t.ok(waits.length > 0 && waits.every((w) => w >= 1 && w <= 60), `Retry-After is within the minute (${Math.max(...waits)} s)`);
});

/** Opens a stream and resolves with a function reading the rest, once the first chunk arrived. */
async function openStream(path: string, headers: Record<string, string>, body: object): Promise<() => Promise<string>> {
  const res = await app.fetch(path, { method: 'POST', auth: false, headers: { ...json, ...headers }, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`opening the stream: ${res.status} ${await res.text()}`);
  return readUntil(res.body as ReadableStream<Uint8Array>, /"(response|content|text|text_delta)"/);
}

t.test('revoking or rotating a key ends its running streams with an error frame', async (t) => {
  const { key } = await create({ name: 'streamer', scopes: ['inference'] });
  const ollama = await openStream('/api/generate', { authorization: `Bearer ${key}` }, { model: 'stories', prompt: LONG });
  const openai = await openStream(
    '/v1/chat/completions',
    { authorization: `Bearer ${key}` },
    { model: 'stories', stream: true, messages: [{ role: 'user', content: LONG }] },
  );
  const anthropic = await openStream(
    '/v1/messages',
    { 'x-api-key': key },
    { model: 'stories', max_tokens: 200, stream: true, messages: [{ role: 'user', content: LONG }] },
  );
  const revoked = await app.fetch('/system/api-keys/streamer', { method: 'DELETE' });
  t.equal(revoked.status, 204);
  const [a, b, c] = await Promise.all([ollama(), openai(), anthropic()]);
  t.notMatch(a, /"done":true/, '/api: the stream did not run to its end');
  t.match(a.trim().split('\n').at(-1), /\{"error":".*revoked/, '/api: it ends with an NDJSON error line');
  t.notMatch(b, /"finish_reason":"stop"/, '/v1: the stream did not run to its end');
  t.match(b, /data: \{"error":\{"message":"[^}]*revoked/, '/v1: it ends with an OpenAI error event');
  t.match(c, /event: error\ndata: \{"type":"error","error":\{"type":"authentication_error","message":"[^}]*revoked/, '/v1/messages: an Anthropic error event');

  const { key: second } = await create({ name: 'rotated-streamer', scopes: ['inference'] });
  const stream = await openStream('/api/chat', { authorization: `Bearer ${second}` }, { model: 'stories', messages: [{ role: 'user', content: LONG }] });
  const rotated = await app.fetch('/system/api-keys/rotated-streamer/rotate', { method: 'POST' });
  t.equal(rotated.status, 200);
  const { key: fresh } = (await rotated.json()) as { key: string };
  const rest = await stream();
  t.match(rest.trim().split('\n').at(-1), /\{"error":".*rotated/, 'rotation ends the old secret’s stream too');
  const after = await post('/api/chat', fresh, { model: 'stories', messages: [{ role: 'user', content: 'hi' }], stream: false });
  t.equal(after.status, 200, 'the new secret streams');
  await after.text();
});

t.test('x-api-key is a credential only on the Anthropic routes, and never next to another key', async (t) => {
  const { key } = await create({ name: 'claude', scopes: ['inference', 'models:read'] });
  const tags = await app.fetch('/api/tags', { auth: false, headers: { 'x-api-key': key } });
  t.equal(tags.status, 401, 'x-api-key alone on /api/tags: 401');
  await tags.text();
  const wrongBearer = await app.fetch('/api/tags', { auth: false, headers: { authorization: 'Bearer lia_wrong', 'x-api-key': key } });
  t.equal(wrongBearer.status, 401, 'a wrong Bearer next to a right x-api-key: 401');
  await wrongBearer.text();
  const body = JSON.stringify({ model: 'stories', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });
  const messages = (headers: Record<string, string>) => app.fetch('/v1/messages', { method: 'POST', auth: false, headers: { ...json, ...headers }, body });
  const good = await messages({ 'x-api-key': key });
  t.equal(good.status, 200, 'x-api-key on /v1/messages');
  await good.text();
  const same = await messages({ 'x-api-key': key, authorization: `Bearer ${key}` });
  t.equal(same.status, 200, 'the same key in both headers');
  await same.text();
  const two = await messages({ 'x-api-key': key, authorization: `Bearer ${app.key}` });
  t.equal(two.status, 401, 'two different keys: 401');
  t.match(await two.json(), { type: 'error', error: { type: 'authentication_error', message: /two different API keys/ } });
  const count = await app.fetch('/v1/messages/count_tokens', { method: 'POST', auth: false, headers: { ...json, 'x-api-key': key }, body });
  t.equal(count.status, 200, 'x-api-key on count_tokens');
  await count.text();
});
