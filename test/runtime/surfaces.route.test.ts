/**
 * The three inference surfaces on the built appliance (the default plugins, the fake backend),
 * through `inject()`: each one streams in its own framing (OpenAI SSE, Anthropic SSE events,
 * Ollama NDJSON), ends a stream that fails partway with its own error frame, answers a request
 * without a key with 401 and a key lacking the route's scope with 403, in its error format.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { readUntil } from '../helpers/stream-reader.js';

// Words 20 ms apart: a stream of the long prompt runs long enough to revoke its key meanwhile.
const app = await startTestAppliance({
  listen: false,
  plugins: {
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 20 } },
  },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');

const json = { 'content-type': 'application/json' };
const LONG = Array.from({ length: 100 }, (_, i) => `word${i}`).join(' ');

async function createKey(name: string, scopes: string[]): Promise<string> {
  const res = await app.fetch('/system/api-keys', { method: 'POST', headers: json, body: JSON.stringify({ name, scopes }) });
  if (res.status !== 201) throw new Error(`creating the key ${name}: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { key: string }).key;
}

/** The SSE `data:` payloads of a body, `[DONE]` included as a string. */
const sseData = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));

/** Opens a stream with `headers`; resolves, once its first text arrived, with a reader of the rest. */
async function openStream(path: string, headers: Record<string, string>, body: object): Promise<() => Promise<string>> {
  const res = await app.fetch(path, { method: 'POST', auth: false, headers: { ...json, ...headers }, body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`opening the stream: ${res.status} ${await res.text()}`);
  return readUntil(res.body as ReadableStream<Uint8Array>, /"(content|text)":"[^"]/);
}

t.test('OpenAI /v1/chat/completions streams SSE chunks and ends with [DONE]', async (t) => {
  const res = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model: 'parrot', stream: true, messages: [{ role: 'user', content: 'hello there' }] }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const data = sseData(await res.text());
  t.equal(data.at(-1), '[DONE]', 'the last event is [DONE]');
  const chunks = data
    .slice(0, -1)
    .map((d) => JSON.parse(d) as { object: string; choices: Array<{ delta: { content?: string }; finish_reason: string | null }> });
  t.ok(
    chunks.every((c) => c.object === 'chat.completion.chunk'),
    'every event is a chat.completion.chunk',
  );
  const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  t.equal(text, 'parrot says: hello there', 'the deltas add up to the answer');
  t.ok(chunks.length > 2, `streamed in pieces (${chunks.length} chunks)`);
  t.equal(chunks.findLast((c) => c.choices[0]?.finish_reason)?.choices[0]?.finish_reason, 'stop');
});

t.test('Anthropic /v1/messages streams its events in order', async (t) => {
  const res = await app.fetch('/v1/messages', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model: 'parrot', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'hello there' }] }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const body = await res.text();
  const events = body
    .split('\n')
    .filter((l) => l.startsWith('event: '))
    .map((l) => l.slice(7));
  t.equal(events[0], 'message_start');
  t.equal(events.at(-1), 'message_stop');
  t.ok(events.includes('content_block_start') && events.includes('content_block_stop') && events.includes('message_delta'), 'the block and the delta events');
  const deltas = sseData(body).map((d) => JSON.parse(d) as { type: string; delta?: { type?: string; text?: string; stop_reason?: string } });
  t.equal(
    deltas
      .filter((d) => d.type === 'content_block_delta')
      .map((d) => d.delta?.text ?? '')
      .join(''),
    'parrot says: hello there',
    'the text deltas add up to the answer',
  );
  t.equal(deltas.find((d) => d.type === 'message_delta')?.delta?.stop_reason, 'end_turn');
});

t.test('Ollama /api/chat streams NDJSON and ends with done', async (t) => {
  const res = await app.fetch('/api/chat', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: 'hello there' }] }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^application\/x-ndjson/);
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { message?: { content: string }; done: boolean; done_reason?: string });
  t.ok(lines.length > 2, `one line per piece (${lines.length} lines)`);
  t.ok(
    lines.slice(0, -1).every((l) => !l.done),
    'only the last line is done',
  );
  t.match(lines.at(-1), { done: true, done_reason: 'stop' });
  t.equal(lines.map((l) => l.message?.content ?? '').join(''), 'parrot says: hello there');
});

t.test('a stream that fails partway ends with the surface’s error frame', async (t) => {
  const key = await createKey('streamer', ['inference']);
  const ollama = await openStream('/api/chat', { authorization: `Bearer ${key}` }, { model: 'parrot', messages: [{ role: 'user', content: LONG }] });
  const openai = await openStream(
    '/v1/chat/completions',
    { authorization: `Bearer ${key}` },
    { model: 'parrot', stream: true, messages: [{ role: 'user', content: LONG }] },
  );
  const anthropic = await openStream(
    '/v1/messages',
    { 'x-api-key': key },
    { model: 'parrot', max_tokens: 500, stream: true, messages: [{ role: 'user', content: LONG }] },
  );
  const revoked = await app.fetch('/system/api-keys/streamer', { method: 'DELETE' });
  t.equal(revoked.status, 204, 'the key is revoked while its streams run');
  const [a, b, c] = await Promise.all([ollama(), openai(), anthropic()]);
  t.notMatch(a, /"done":true/, '/api/chat: the stream did not run to its end');
  t.match(a.trim().split('\n').at(-1), /^\{"error":".*revoked/, '/api/chat: it ends with an NDJSON error line');
  t.notMatch(b, /"finish_reason":"stop"/, '/v1/chat/completions: the stream did not run to its end');
  t.match(sseData(b).at(-1), /^\{"error":\{"message":"[^}]*revoked/, '/v1/chat/completions: it ends with an OpenAI error event');
  t.notMatch(c, /event: message_stop/, '/v1/messages: the stream did not run to its end');
  t.match(c, /event: error\ndata: \{"type":"error","error":\{"type":"authentication_error","message":"[^}]*revoked/, '/v1/messages: an Anthropic error event');
});

t.test('no key: 401 in each surface’s error format', async (t) => {
  const chat = { model: 'parrot', messages: [{ role: 'user', content: 'hi' }] };
  const ollama = await app.fetch('/api/chat', { method: 'POST', auth: false, headers: json, body: JSON.stringify(chat) });
  t.equal(ollama.status, 401, '/api/chat: 401');
  t.match(await ollama.json(), { error: String }, '/api/chat: Ollama error shape');
  const openai = await app.fetch('/v1/chat/completions', { method: 'POST', auth: false, headers: json, body: JSON.stringify(chat) });
  t.equal(openai.status, 401, '/v1/chat/completions: 401');
  t.match(await openai.json(), { error: { message: String, type: String } }, '/v1/chat/completions: OpenAI error shape');
  const anthropic = await app.fetch('/v1/messages', { method: 'POST', auth: false, headers: json, body: JSON.stringify({ ...chat, max_tokens: 5 }) });
  t.equal(anthropic.status, 401, '/v1/messages: 401');
  t.match(await anthropic.json(), { type: 'error', error: { type: 'authentication_error', message: String } }, '/v1/messages: Anthropic error shape');
  const system = await app.fetch('/system/api-keys', { auth: false });
  t.equal(system.status, 401, '/system/api-keys: 401');
  await system.text();
});

t.test('a key lacking the route’s scope: 403 naming the scope, in each surface’s format', async (t) => {
  const reader = await createKey('reader', ['models:read']);
  const as = { ...json, authorization: `Bearer ${reader}` };
  const tags = await app.fetch('/api/tags', { auth: false, headers: as });
  t.equal(tags.status, 200, 'the key holds models:read: /api/tags answers');
  await tags.text();
  const chat = { model: 'parrot', messages: [{ role: 'user', content: 'hi' }] };
  const ollama = await app.fetch('/api/chat', { method: 'POST', auth: false, headers: as, body: JSON.stringify(chat) });
  t.equal(ollama.status, 403, '/api/chat: 403');
  t.match(await ollama.json(), { error: /"inference"/ }, '/api/chat: names the scope, Ollama shape');
  const openai = await app.fetch('/v1/chat/completions', { method: 'POST', auth: false, headers: as, body: JSON.stringify(chat) });
  t.equal(openai.status, 403, '/v1/chat/completions: 403');
  t.match(await openai.json(), { error: { message: /"inference"/, type: 'permission_error' } }, '/v1/chat/completions: names the scope, OpenAI shape');
  const anthropic = await app.fetch('/v1/messages', {
    method: 'POST',
    auth: false,
    headers: { ...json, 'x-api-key': reader },
    body: JSON.stringify({ ...chat, max_tokens: 5 }),
  });
  t.equal(anthropic.status, 403, '/v1/messages: 403');
  t.match(
    await anthropic.json(),
    { type: 'error', error: { type: 'permission_error', message: /"inference"/ } },
    '/v1/messages: names the scope, Anthropic shape',
  );
  const keys = await app.fetch('/system/api-keys', { auth: false, headers: as });
  t.equal(keys.status, 403, '/system/api-keys without keys:admin: 403');
  t.match(await keys.json(), { error: /"keys:admin"/ });
});
