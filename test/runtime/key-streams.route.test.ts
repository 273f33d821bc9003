/**
 * A named key's `concurrent_streams` limit as clients see it: while the key's one allowed answer
 * streams, its next inference request is a 429 with Retry-After in each surface's shape, other keys
 * are not held to it, and once the stream ends the key is admitted again. (A client that leaves:
 * key-streams.e2e.test.ts, which needs a real connection to close.)
 */
import t, { type Test } from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';

// Words 100 ms apart: the first stream is still going when the second request arrives.
const app = await startTestAppliance({
  listen: false,
  plugins: {
    'host-network': { options: { mdns: 'off' } },
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 100 } },
  },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');

const json = { 'content-type': 'application/json' };
const created = await app.fetch('/system/api-keys', {
  method: 'POST',
  headers: json,
  body: JSON.stringify({ name: 'one-at-a-time', scopes: ['inference'], limits: { concurrent_streams: 1 } }),
});
if (created.status !== 201) throw new Error(`creating the key: ${created.status} ${await created.text()}`);
const { key } = (await created.json()) as { key: string };

const chat = (k: string | null, init: { signal?: AbortSignal; prompt?: string } = {}) =>
  app.fetch('/api/chat', {
    method: 'POST',
    headers: { ...json, ...(k ? { authorization: `Bearer ${k}` } : {}) },
    body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: init.prompt ?? 'one two three four five six seven eight' }] }),
    ...(init.signal ? { signal: init.signal } : {}),
  });

/** Opens a streamed chat with `key` and resolves once its first line has arrived. */
async function openStream(t: Test, signal?: AbortSignal): Promise<{ rest: Promise<string> }> {
  const res = await chat(key, signal ? { signal } : {});
  t.equal(res.status, 200, 'the first stream is admitted');
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!text.includes('\n')) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended before its first line: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { rest };
}

t.test('a second stream of the key waits its turn: 429 with Retry-After, on /api and /v1', async (t) => {
  const first = await openStream(t);
  const again = await chat(key, { prompt: 'hi' });
  t.equal(again.status, 429, 'the second concurrent request is refused');
  t.ok(Number(again.headers.get('retry-after')) >= 1, 'with Retry-After');
  t.match(await again.json(), { error: /1 concurrent streams/ });
  const v1 = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { ...json, authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.equal(v1.status, 429);
  t.match(await v1.json(), { error: { message: /concurrent streams/ } }, 'in the OpenAI format');
  const master = await chat(null, { prompt: 'hi' });
  t.equal(master.status, 200, 'the master key is not held to the named key’s limit');
  await master.text();

  const whole = await first.rest;
  t.match(whole, /"done":true/, 'the first stream finished');
  const after = await chat(key, { prompt: 'hi' });
  t.equal(after.status, 200, 'the key is admitted again once its stream ended');
  await after.text();
});
