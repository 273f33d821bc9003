/**
 * `/metrics` per API key: a named key created through `/system/api-keys` and the master key each
 * get `lia_key_requests_total`, `lia_key_prompt_tokens_total` and `lia_key_generated_tokens_total`
 * labelled with the key's name, counting inference requests only (as `/system/usage` does); an
 * unauthenticated request gets no series, and no secret appears anywhere in the scrape. The fake
 * backend answers `prefix + input` word by word, so the token counts are known in advance.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { ENGINE_ONLY } from '../helpers/plugin-sets.js';

const json = { 'content-type': 'application/json' };
const bearer = (key: string) => ({ ...json, authorization: `Bearer ${key}` });

const app = await startTestAppliance({ listen: false, plugins: { ...ENGINE_ONLY, 'backend-llama-cpp': false, 'fake-backend': FAKE_BACKEND } });
t.teardown(() => app.close());
// Two words of prefix: a generation of N prompt words yields N prompt tokens and 2 + N generated.
await createFakeModel(app, 'parrot', 'parrot says:');

/** The value of `series{key="NAME"}` in a scrape, or null without such a series. */
function value(text: string, series: string, key: string): number | null {
  const m = new RegExp(`^${series}\\{key="${key}"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

async function ok(res: Awaited<ReturnType<typeof app.fetch>>, what: string): Promise<void> {
  if (res.status !== 200) throw new Error(`${what}: HTTP ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

t.test('requests and tokens per key, labelled by name, never by secret', async (t) => {
  const created = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ name: 'ci-bot', scopes: ['inference', 'models:read'] }),
  });
  t.equal(created.status, 201);
  const { key, hint } = (await created.json()) as { key: string; hint: string };

  const chat = { model: 'parrot', messages: [{ role: 'user', content: 'hello there' }], stream: false };
  for (let i = 0; i < 2; i++) await ok(await app.fetch('/api/chat', { method: 'POST', headers: bearer(key), body: JSON.stringify(chat) }), 'chat');
  await ok(await app.fetch('/api/embed', { method: 'POST', headers: bearer(key), body: JSON.stringify({ model: 'parrot', input: 'a b c' }) }), 'embed');
  await ok(await app.fetch('/api/tags', { headers: bearer(key) }), 'tags');
  await ok(
    await app.fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt: 'once upon a time', stream: false }) }),
    'generate',
  );
  const anonymous = await app.fetch('/api/chat', { method: 'POST', headers: json, body: JSON.stringify(chat), auth: false });
  t.equal(anonymous.status, 401);
  await anonymous.arrayBuffer();

  const res = await app.fetch('/metrics');
  t.equal(res.status, 200);
  const text = await res.text();
  t.equal(value(text, 'lia_key_requests_total', 'ci-bot'), 3, 'two chats and an embedding; /api/tags is not an inference request');
  t.equal(value(text, 'lia_key_prompt_tokens_total', 'ci-bot'), 2 + 2 + 3, 'prompt tokens, embeddings included');
  t.equal(value(text, 'lia_key_generated_tokens_total', 'ci-bot'), 4 + 4);
  t.equal(value(text, 'lia_key_requests_total', 'master'), 1, 'the master key by its name; its HTTP requests (create, scrape) are not counted');
  t.equal(value(text, 'lia_key_prompt_tokens_total', 'master'), 4);
  t.equal(value(text, 'lia_key_generated_tokens_total', 'master'), 6);

  const keys = [...text.matchAll(/^lia_key_\w+\{key="([^"]*)"\}/gm)].map((m) => m[1]);
  t.same([...new Set(keys)].sort(), ['ci-bot', 'master'], 'one label per key that asked; none for the unauthenticated request');

  const usage = (await (await app.fetch('/system/usage')).json()) as {
    keys: Array<{ name: string; requests: number; prompt_tokens: number; completion_tokens: number }>;
  };
  t.same(usage.keys.map((u) => u.name).sort(), ['ci-bot', 'master']);
  for (const u of usage.keys) {
    t.same(
      [
        value(text, 'lia_key_requests_total', u.name),
        value(text, 'lia_key_prompt_tokens_total', u.name),
        value(text, 'lia_key_generated_tokens_total', u.name),
      ],
      [u.requests, u.prompt_tokens, u.completion_tokens],
      `${u.name}: the same counts as /system/usage`,
    );
  }

  for (const [name, secret] of [
    ['ci-bot', key],
    ['master', app.key],
  ] as const) {
    t.notOk(text.includes(secret), `${name}'s secret is not in the scrape`);
    t.notOk(text.includes(secret.slice(4, 30)), `nor a part of it`);
  }
  t.notOk(text.includes(hint), "nor the named key's hint");
});
