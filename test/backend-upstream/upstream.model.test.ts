/**
 * `backend-upstream` end to end: two real appliances are the upstreams (stories260K-chatml for
 * real text, a slow fake model for streams that are still flowing when a replica dies, a fake
 * model for embeddings), and a front appliance serves their models as remote models through
 * every surface. Upstream B sits behind a TCP relay the test cuts and restores, as a host that
 * goes away and comes back on the same address.
 */
import net from 'node:net';
import OpenAI from 'openai';
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { upstreamAccess } from '../helpers/upstream-access.js';

/** Words of the slow fake model: with 50 ms between words, an answer streams for more than a second. */
const SLOW_TEXT = 'a b c d e f g h i j k l m n o p q r s t u v w x y';
const UNUSED = { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false, 'backend-transformers': false } as const;

/** A TCP relay in front of a port: `cut()` closes it and drops every connection; `open()` listens again on the same port. */
class Relay {
  port = 0;
  #server: net.Server | null = null;
  readonly #sockets = new Set<net.Socket>();
  constructor(readonly target: number) {}

  async open(): Promise<void> {
    const server = net.createServer((client) => {
      const upstream = net.connect(this.target, '127.0.0.1');
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.on('close', () => this.#sockets.delete(s));
        s.on('error', () => (client.destroy(), upstream.destroy()));
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as net.AddressInfo).port;
    this.#server = server;
  }

  cut(): void {
    this.#server?.close();
    this.#server = null;
    for (const s of this.#sockets) s.destroy();
  }
}

async function upstreamAppliance(): Promise<TestAppliance> {
  const app = await startTestAppliance({ plugins: { ...UNUSED, 'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 50 } } } });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K-chatml.gguf');
  await createFakeModel(app, 'slow', SLOW_TEXT);
  return app;
}

const a = await upstreamAppliance();
const b = await upstreamAppliance();
let bRequests = 0;
b.hooks.inferenceObservers.register({ name: 'test-count', onEvent: (e) => void (e.type === 'request' && bRequests++) });

const [toA, toB] = [await upstreamAccess(t, a), await upstreamAccess(t, b)];
const relay = new Relay(b.port);
await relay.open();
t.teardown(() => relay.cut());

const models = [
  { model: 'stories', name: 'story' },
  { model: 'slow', name: 'slow' },
  { model: 'slow', name: 'vec', capabilities: ['embedding'] },
];
const front = await startTestAppliance({
  plugins: {
    ...UNUSED,
    'backend-llama-cpp': false,
    'backend-upstream': {
      options: {
        health_interval_ms: 200,
        upstreams: [
          { name: 'a', url: a.url, flavour: 'openai', ...toA, models },
          { name: 'b', url: `https://localhost:${relay.port}`, flavour: 'openai', ...toB, models },
          {
            name: 'a-ollama',
            url: a.url,
            flavour: 'ollama',
            ...toA,
            models: [
              { model: 'stories', name: 'story-ollama' },
              { model: 'slow', name: 'slow-ollama' },
            ],
          },
          { name: 'ghost', url: a.url, flavour: 'openai', ...toA, models: [{ model: 'not-there', name: 'ghost' }] },
        ],
      },
    },
  },
});
t.teardown(() => front.close());
const client = new OpenAI({
  apiKey: front.key,
  baseURL: `${front.url}/v1`,
  maxRetries: 0,
  fetch: ((url: string, init: RequestInit) => fetch(url, { ...init, dispatcher: front.dispatcher() } as RequestInit)) as unknown as typeof fetch,
});
const post = (p: string, body: unknown) => front.fetch(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const hi = [{ role: 'user' as const, content: 'hi' }];

t.test('remote models are listed as remote in /api/tags, /v1/models and /api/show', async (t) => {
  const tags = (await (await front.fetch('/api/tags')).json()) as { models: Array<Record<string, unknown>> };
  const story = tags.models.find((m) => m['name'] === 'story:latest');
  t.ok(story, 'story is listed');
  t.equal(story!['remote_model'], 'stories');
  t.match(story!['remote_host'], new RegExp(`${a.url}.*localhost:${relay.port}`), 'both replicas named');
  t.equal((story!['details'] as { format: string }).format, 'upstream');

  const listed = await client.models.list();
  const entry = listed.data.find((m) => m.id === 'story:latest') as unknown as Record<string, unknown>;
  t.equal(entry?.['remote_model'], 'stories');

  const show = (await (await post('/api/show', { model: 'story' })).json()) as Record<string, unknown>;
  t.equal(show['remote_model'], 'stories');
  t.same(show['capabilities'], ['completion', 'tools']);
});

t.test('/api/chat and /v1/chat/completions, streamed and not, through both flavours', async (t) => {
  for (const model of ['story', 'story-ollama']) {
    const res = await post('/api/chat', { model, messages: hi, stream: false, options: { num_predict: 8 } });
    t.equal(res.status, 200, model);
    const body = (await res.json()) as { message: { content: string }; done: boolean; eval_count: number; model: string };
    t.ok(body.message.content.length > 0 && body.done, `${model}: text and done`);
    t.equal(body.model, model, 'the name as asked');

    const streamed = await post('/api/chat', { model, messages: hi, options: { num_predict: 8 } });
    const lines = (await streamed.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { done: boolean; message: { content: string } });
    t.ok(lines.length > 2 && lines.at(-1)!.done, `${model}: NDJSON ends with done`);
  }
  const done = await client.chat.completions.create({ model: 'story', messages: hi, max_tokens: 8 });
  t.ok(done.choices[0]!.message.content!.length > 0);
  t.ok(done.usage!.completion_tokens > 0 && done.usage!.completion_tokens <= 8);
  const stream = await client.chat.completions.create({ model: 'story', messages: hi, max_tokens: 8, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta.content ?? '';
  t.ok(text.length > 0, 'streamed text');
});

t.test('every surface reaches the upstream (fake model: exact text)', async (t) => {
  const gen = (await (await post('/api/generate', { model: 'slow', prompt: 'zz', stream: false, options: { num_predict: 3 } })).json()) as { response: string };
  t.equal(gen.response, 'a b c');
  const genOllama = (await (await post('/api/generate', { model: 'slow-ollama', prompt: 'zz', stream: false })).json()) as { response: string };
  t.equal(genOllama.response, `${SLOW_TEXT} zz`, 'ollama flavour, prompt after the model text');
  const cmpl = await client.completions.create({ model: 'slow', prompt: 'zz', max_tokens: 2 });
  t.equal(cmpl.choices[0]!.text, 'a b');
  const resp = await client.responses.create({ model: 'slow', input: 'zz', max_output_tokens: 2 });
  t.equal(resp.output_text, 'a b');
  const msg = await post('/v1/messages', { model: 'slow', max_tokens: 2, messages: hi });
  t.equal(((await msg.json()) as { content: Array<{ text: string }> }).content[0]!.text, 'a b');

  const direct = (await (await a.fetch('/api/embed', { method: 'POST', body: JSON.stringify({ model: 'slow', input: ['x', 'y'] }) })).json()) as {
    embeddings: number[][];
  };
  const embed = (await (await post('/api/embed', { model: 'vec', input: ['x', 'y'] })).json()) as { embeddings: number[][] };
  t.same(embed.embeddings, direct.embeddings, '/api/embed: the upstream vectors');
  const v1 = await client.embeddings.create({ model: 'vec', input: 'x' });
  // The client asks for base64 (float32): equal to float32 precision.
  t.ok(
    v1.data[0]!.embedding.every((x, i) => Math.abs(x - direct.embeddings[0]![i]!) < 1e-6),
    '/v1/embeddings',
  );
});

t.test('pull, push, copy and delete of a remote model are a 400 saying what it is', async (t) => {
  for (const [p, body, method] of [
    ['/api/pull', { model: 'story' }, 'POST'],
    ['/api/push', { model: 'story' }, 'POST'],
    ['/api/copy', { source: 'story', destination: 'mine' }, 'POST'],
    ['/api/delete', { model: 'story' }, 'DELETE'],
  ] as const) {
    const res = await front.fetch(p, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    t.equal(res.status, 400, p);
    t.match(((await res.json()) as { error: string }).error, /"story:latest" is a remote model/, p);
  }
});

t.test("an upstream's error is mapped to the surface's shape, its body not passed on", async (t) => {
  const api = await post('/api/chat', { model: 'ghost', messages: hi, stream: false });
  t.equal(api.status, 404);
  const apiBody = (await api.json()) as { error: string };
  t.match(apiBody.error, /upstream "ghost" answered HTTP 404/);
  t.notMatch(apiBody.error, /not-there/, 'the upstream body is not passed on');
  const v1 = await post('/v1/chat/completions', { model: 'ghost', messages: hi });
  t.equal(v1.status, 404);
  const v1Body = (await v1.json()) as { error: { message: string; type: string } };
  t.match(v1Body.error.message, /upstream "ghost"/);
});

t.test('a replica that dies mid-run: buffered requests all succeed, its streams end with an error frame, it comes back', async (t) => {
  const before = bRequests;
  const started: Promise<void>[] = [];
  const streams = Array.from({ length: 6 }, async (_, i) => {
    let flowing!: () => void;
    started[i] = new Promise<void>((resolve) => (flowing = resolve));
    const s = await client.chat.completions.create({ model: 'slow', messages: hi, stream: true });
    let text = '';
    try {
      for await (const c of s) {
        text += c.choices[0]?.delta.content ?? '';
        if (text) flowing();
      }
      return { ok: true, text };
    } catch (err) {
      return { ok: false, text, message: (err as Error).message };
    } finally {
      flowing();
    }
  });
  // Once its first words are out, a stream stays on its replica (no retry after the first byte).
  await Promise.all(started);
  const buffered = Array.from({ length: 8 }, () => post('/api/chat', { model: 'slow', messages: hi, stream: false }));
  await new Promise((r) => setTimeout(r, 50));
  relay.cut();
  const answers = await Promise.all(
    buffered.map(async (p) => {
      const res = await p;
      return { status: res.status, body: (await res.json()) as { message?: { content: string } } };
    }),
  );
  t.same(
    answers.map((x) => x.status),
    Array(8).fill(200),
    'no buffered request failed',
  );
  t.ok(
    answers.every((x) => x.body.message?.content === `${SLOW_TEXT} hi`),
    'each got the whole answer',
  );
  const ended = await Promise.all(streams);
  t.ok(bRequests > before, 'replica b served some of the run');
  const failed = ended.filter((s) => !s.ok);
  t.ok(failed.length >= 1, `the streams on b ended with an error frame (${failed.length} of 6)`);
  for (const f of failed) t.match(f.message, /upstream "b"/, 'the frame names the replica');
  for (const s of ended.filter((s) => s.ok)) t.equal(s.text, `${SLOW_TEXT} hi`, 'streams on a completed');

  await relay.open();
  const served = bRequests;
  const deadline = Date.now() + 10_000;
  while (bRequests === served && Date.now() < deadline) {
    await Promise.all(
      Array.from({ length: 4 }, () =>
        post('/api/chat', { model: 'slow', messages: hi, stream: false, options: { num_predict: 1 } }).then((r) => r.arrayBuffer()),
      ),
    );
    await new Promise((r) => setTimeout(r, 100));
  }
  t.ok(bRequests > served, 'b is used again once it is back');
});
