/**
 * Named keys as an operator and a client see them: created through `/system/api-keys` with scopes,
 * a model allow-list, an expiry and limits; held to them on every surface; revoked and rotated
 * from the next request on; usage per key and model that survives a restart; a key file without
 * secrets. (`lia key create|list|revoke|rotate NAME`, a process that needs a URL:
 * named-keys.e2e.test.ts.)
 */
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createFakeModel, startTestAppliance, type TestAppliance } from '../../core/testing/index.js';
import { fakeBackendOnly } from '../helpers/plugin-sets.js';

const json = { 'content-type': 'application/json' };
const bearer = (key: string) => ({ ...json, authorization: `Bearer ${key}` });

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-named-keys-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
const start = () =>
  startTestAppliance({
    listen: false,
    dataDir,
    plugins: {
      ...fakeBackendOnly(),
      'auth-api-key': { options: { usageSaveDelayMs: 50 } },
    },
  });
let app: TestAppliance = await start();
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');
await createFakeModel(app, 'crow', 'crow says:');

async function create(body: object): Promise<{ key: string; name: string; hint: string }> {
  const res = await app.fetch('/system/api-keys', { method: 'POST', headers: json, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`creating a key: ${res.status} ${await res.text()}`);
  return (await res.json()) as { key: string; name: string; hint: string };
}
const chat = (key: string, model = 'parrot') =>
  app.fetch('/api/chat', {
    method: 'POST',
    headers: bearer(key),
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello there' }], stream: false }),
  });
const openai = (key: string, model: string) =>
  app.fetch('/v1/chat/completions', { method: 'POST', headers: bearer(key), body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }] }) });

const secrets: string[] = [];

t.test('an inference-only key with a model allow-list', async (t) => {
  const created = await create({ name: 'ci-bot', scopes: ['inference'], models: ['parr*'] });
  secrets.push(created.key);
  t.match(created, { name: 'ci-bot', scopes: ['inference'], models: ['parr*'], expires_at: null, limits: null, last_used_at: null, usage: { requests: 0 } });
  t.match(created.key, /^lia_/);
  t.equal(created.hint, `${created.key.slice(0, 6)}…${created.key.slice(-2)}`);

  const ok = await chat(created.key);
  t.equal(ok.status, 200, 'it chats');
  t.match(await ok.json(), { message: { content: /parrot says:/ } });
  t.equal((await openai(created.key, 'parrot')).status, 200, 'on the OpenAI surface too');

  const tags = await app.fetch('/api/tags', { headers: bearer(created.key) });
  t.equal(tags.status, 403, 'inference does not grant models:read');
  t.match(await tags.json(), { error: /"models:read"/ });
  for (const route of ['/system/status', '/system/api-keys', '/system/usage']) {
    const res = await app.fetch(route, { headers: bearer(created.key) });
    t.equal(res.status, 403, `${route}: 403`);
    await res.arrayBuffer();
  }

  const crow = await chat(created.key, 'crow');
  t.equal(crow.status, 403, 'a model outside the allow-list');
  t.same(await crow.json(), { error: 'this API key may not use the model "crow"' });
  const v1 = await openai(created.key, 'crow');
  t.equal(v1.status, 403);
  t.match(await v1.json(), { error: { message: /"crow"/, type: 'permission_error', param: 'model' } }, 'in the OpenAI error format');
  const missing = await chat(created.key, 'nothing-here');
  t.equal(missing.status, 403, 'a model that does not exist is refused the same way: the key learns nothing');
  const embed = await app.fetch('/api/embed', { method: 'POST', headers: bearer(created.key), body: JSON.stringify({ model: 'crow', input: 'x' }) });
  t.equal(embed.status, 403, 'embeddings too');
  await embed.arrayBuffer();
});

t.test('bad requests to create a key', async (t) => {
  const cases: Array<[object, number, RegExp]> = [
    [{ name: 'x', scopes: ['root'] }, 400, /unknown scope "root"/],
    [{ name: 'master', scopes: ['inference'] }, 400, /reserved/],
    [{ name: 'rotate', scopes: ['inference'] }, 400, /reserved/],
    [{ name: 'Bad Name', scopes: ['inference'] }, 400, /name must match/],
    [{ name: 'ci-bot', scopes: ['inference'] }, 409, /exists/],
    [{ name: 'old', scopes: ['inference'], expires_at: '2001-01-01T00:00:00Z' }, 400, /past/],
    [{ name: 'x', scopes: ['inference'], limits: { requests_per_minute: 0 } }, 400, /requests_per_minute/],
  ];
  for (const [body, status, message] of cases) {
    const res = await app.fetch('/system/api-keys', { method: 'POST', headers: json, body: JSON.stringify(body) });
    t.equal(res.status, status, JSON.stringify(body));
    t.match(await res.json(), { error: message });
  }

  const admin = await create({ name: 'key-admin', scopes: ['keys:admin'] });
  secrets.push(admin.key);
  const broader = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: bearer(admin.key),
    body: JSON.stringify({ name: 'wider', scopes: ['keys:admin', 'system:admin'] }),
  });
  t.equal(broader.status, 403, 'a keys:admin key cannot mint a key with scopes it lacks');
  t.match(await broader.json(), { error: /broader in scopes: it would hold "system:admin", which this API key lacks/ });
  const same = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: bearer(admin.key),
    body: JSON.stringify({ name: 'peer', scopes: ['keys:admin'] }),
  });
  t.equal(same.status, 201, 'but may mint one with its own');
  secrets.push(((await same.json()) as { key: string }).key);
});

t.test('expiry, revocation and rotation take effect on the next request', async (t) => {
  const soon = await create({ name: 'brief', scopes: ['models:read'], expires_at: new Date(Date.now() + 1500).toISOString() });
  secrets.push(soon.key);
  t.equal((await app.fetch('/api/tags', { headers: bearer(soon.key) })).status, 200);
  await new Promise((r) => setTimeout(r, 1600));
  const expired = await app.fetch('/api/tags', { headers: bearer(soon.key) });
  t.equal(expired.status, 401);
  t.same(await expired.json(), { error: 'key expired' });

  const gone = await create({ name: 'gone', scopes: ['models:read'] });
  secrets.push(gone.key);
  t.equal((await app.fetch('/api/tags', { headers: bearer(gone.key) })).status, 200);
  t.equal((await app.fetch('/system/api-keys/gone', { method: 'DELETE' })).status, 204);
  const revoked = await app.fetch('/api/tags', { headers: bearer(gone.key) });
  t.equal(revoked.status, 401, 'revoked: refused at once');
  t.match(await revoked.json(), { error: 'invalid API key' });
  t.equal((await app.fetch('/system/api-keys/gone', { method: 'DELETE' })).status, 404, 'a second revoke: 404');

  const turn = await create({ name: 'turn', scopes: ['models:read'] });
  const rotated = await app.fetch('/system/api-keys/turn/rotate', { method: 'POST' });
  t.equal(rotated.status, 200);
  t.equal(rotated.headers.get('cache-control'), 'no-store');
  const { key } = (await rotated.json()) as { key: string };
  secrets.push(turn.key, key);
  t.equal((await app.fetch('/api/tags', { headers: bearer(turn.key) })).status, 401, 'the old secret is refused');
  t.equal((await app.fetch('/api/tags', { headers: bearer(key) })).status, 200, 'the new one works');
});

t.test('rate limits answer 429 with Retry-After', async (t) => {
  const slow = await create({ name: 'slow', scopes: ['models:read'], limits: { requests_per_minute: 3 } });
  secrets.push(slow.key);
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await app.fetch('/api/tags', { headers: bearer(slow.key) });
    statuses.push(res.status);
    await res.arrayBuffer();
  }
  const last = await app.fetch('/api/tags', { headers: bearer(slow.key) });
  statuses.push(last.status);
  t.same(statuses, [200, 200, 200, 429]);
  t.match(Number(last.headers.get('retry-after')), /^(1[0-9]|20)$/, 'a request every 20 s: Retry-After in (10, 20]');
  t.match(await last.json(), { error: /3 requests per minute/ });
  t.equal((await app.fetch('/api/tags')).status, 200, 'other keys are not affected');

  const thrifty = await create({ name: 'thrifty', scopes: ['inference'], limits: { tokens_per_minute: 5 } });
  secrets.push(thrifty.key);
  t.equal((await chat(thrifty.key)).status, 200, 'the first chat spends more than the minute allows');
  const over = await chat(thrifty.key);
  t.equal(over.status, 429);
  t.ok(Number(over.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.match(await over.json(), { error: /5 tokens per minute/ });
  const v1 = await openai(thrifty.key, 'parrot');
  t.equal(v1.status, 429);
  t.match(await v1.json(), { error: { type: String, message: /tokens per minute/ } }, 'in the OpenAI format');
});

t.test('usage per key and model survives a restart; the key file holds no secret', async (t) => {
  const list = async () =>
    (
      (await (await app.fetch('/system/api-keys')).json()) as {
        keys: Array<{ name: string; usage: { requests: number; completion_tokens: number }; last_used_at: string | null; hint: string }>;
      }
    ).keys;
  const before = (await list()).find((k) => k.name === 'ci-bot');
  t.match(before, { usage: { requests: 2 }, last_used_at: String });
  t.ok(before!.usage.completion_tokens > 0);
  const master = (await list()).find((k) => k.name === 'master');
  t.match(master, { scopes: ['*'], models: null, limits: null, hint: /^lia_..…..$/ });

  await app.close();
  app = await start();
  const after = (await list()).find((k) => k.name === 'ci-bot');
  t.same(after?.usage, before?.usage, 'the same counts after a restart');
  const usage = (await (await app.fetch('/system/usage')).json()) as { keys: Array<{ name: string; models: Record<string, { requests: number }> }> };
  t.match(
    usage.keys.find((k) => k.name === 'ci-bot'),
    { requests: 2, models: { 'parrot:latest': { requests: 2 } } },
    'per model',
  );
  t.equal((await chat(secrets[0]!)).status, 200, 'the key still works after the restart');

  const file = path.join(dataDir, 'keys', 'named-keys.json');
  t.equal((await stat(file)).mode & 0o777, 0o600);
  const texts: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      // A file that is gone by the time it is read is an atomic write's temporary file, renamed.
      else if (e.isFile()) texts.push(await readFile(p, 'latin1').catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? '' : Promise.reject(err))));
    }
  };
  await walk(dataDir);
  const leaked = secrets.filter((s) => texts.some((text) => text.includes(s) || text.includes(s.slice(4, 30))));
  t.same(leaked, [], `no named key's secret in any of the ${texts.length} files of the data directory`);
});
