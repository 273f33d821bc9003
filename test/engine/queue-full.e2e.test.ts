/**
 * The queue where people look, on a real appliance over HTTPS (the fake backend, one slot,
 * `maxQueue` 1): while a stream holds the slot and one request waits, `/api/ps` gives the model's
 * slots, running and queued requests, context per slot, engine and device; one request more is a
 * 503 in the error format of its surface (Ollama's `{error}` under `/api`, OpenAI's under `/v1`)
 * with a `Retry-After` of ceil(queued ÷ the rate waiters left the queue over the last minute):
 * 60 s, 30 s, 20 s as one, two, three more waiters get the slot. A stream is let go by aborting it,
 * which needs a real connection (`inject()` cannot close a request on the server side).
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { ENGINE_ONLY } from '../helpers/plugin-sets.js';
import { readUntil } from '../helpers/stream-reader.js';
import { waitFor } from '../helpers/wait.js';

const app = await startTestAppliance({
  plugins: { ...ENGINE_ONLY, 'backend-llama-cpp': false, 'api-openai': {}, 'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 20 } } },
  env: { LIA_NUM_PARALLEL: '1', LIA_MAX_QUEUE: '1', LIA_CONTEXT_LENGTH: '2048' },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');

const json = { 'content-type': 'application/json' };
// 2,000 words 20 ms apart: a stream that holds the slot until the test lets it go.
const LONG = Array.from({ length: 2000 }, (_, i) => `word${i}`).join(' ');

interface PsModel {
  name: string;
  parallel: number;
  running: number;
  queued: number;
  context_length: number;
  engine: string;
  device: string;
}

async function ps(): Promise<PsModel | undefined> {
  const body = (await (await app.fetch('/api/ps')).json()) as { models: PsModel[] };
  return body.models.find((m) => m.name === 'parrot:latest');
}

/** A generation that holds the slot; resolves once its first word arrived, with a way to let it go. */
async function hold(): Promise<() => Promise<void>> {
  const ctl = new AbortController();
  const res = await app.fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt: LONG }), signal: ctl.signal });
  if (res.status !== 200) throw new Error(`holding the slot: ${res.status} ${await res.text()}`);
  const rest = await readUntil(res.body as ReadableStream<Uint8Array>, /"response":"[^"]/);
  // Read on: an answer nobody holds on to is collected, and undici then closes its connection.
  const reading = rest().catch(() => '');
  return async () => {
    ctl.abort();
    await reading;
    await waitFor('the slot to be free', async () => (await ps())?.running === 0);
  };
}

/** A short request that waits for the held slot; resolves once it is queued, with its status to come. */
async function waiter(): Promise<{ answered: Promise<number> }> {
  const answered = app
    .fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt: 'hi', stream: false }) })
    .then(async (res) => (await res.arrayBuffer(), res.status));
  await waitFor('the request to be queued', async () => (await ps())?.queued === 1);
  return { answered };
}

async function refused(path: '/api/generate' | '/v1/chat/completions'): Promise<{ status: number; retryAfter: string | null; body: unknown }> {
  const body = path === '/api/generate' ? { model: 'parrot', prompt: 'hi', stream: false } : { model: 'parrot', messages: [{ role: 'user', content: 'hi' }] };
  const res = await app.fetch(path, { method: 'POST', headers: json, body: JSON.stringify(body) });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

// The first request waits for the load: the first waiter to leave the queue with a slot.
const warm = await app.fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt: 'hi', stream: false }) });
t.equal(warm.status, 200, 'loaded');
await warm.arrayBuffer();

t.test('a held slot and a waiter: /api/ps says so; one more is a 503 with Retry-After in each surface', async (t) => {
  const release = await hold();
  const waiting = await waiter();
  t.match(
    await ps(),
    { parallel: 1, running: 1, queued: 1, context_length: 2048, engine: 'fake', device: 'cpu' },
    'slots, running, queued, context per slot, engine, device',
  );
  const ollama = await refused('/api/generate');
  t.match(
    ollama,
    { status: 503, retryAfter: '60', body: { error: /^server busy, please try again\.\s+maximum pending requests exceeded/ } },
    "Ollama's shape; one release in the minute: 60 s",
  );
  const openai = await refused('/v1/chat/completions');
  t.match(openai, { status: 503, retryAfter: '60', body: { error: { message: /^server busy/, type: String } } }, "OpenAI's shape, the same Retry-After");
  await release();
  t.equal(await waiting.answered, 200, 'the waiter got the slot');
});

t.test('as more waiters leave the queue, Retry-After shrinks with the rate', async (t) => {
  for (const expected of ['30', '20']) {
    const release = await hold();
    const waiting = await waiter();
    t.match(await refused('/api/generate'), { status: 503, retryAfter: expected }, `one queued at ${60 / Number(expected)} a minute: ${expected} s`);
    await release();
    t.equal(await waiting.answered, 200);
  }
  t.match(await ps(), { running: 0, queued: 0 }, 'nothing left running or waiting');
});
