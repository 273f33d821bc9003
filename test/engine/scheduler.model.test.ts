/**
 * The scheduler as a user meets it, with 2 slots per model, a queue of 2 and 1 loaded model:
 * concurrent requests share a model, the queue overflows into 503 + Retry-After, a client that
 * leaves frees its slot at once, keep_alive expires models, a new model evicts an idle one but
 * waits for a busy one, a larger num_ctx loads a model again (and a request without one is never
 * held to another client's smaller num_ctx), deleting a loaded model
 * unloads it, and stopping svc-inference answers 503.
 */
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EngineService } from '../../plugins/engine/service.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance({
  plugins: { engine: { options: { numParallel: 2, maxQueue: 2, maxLoadedModels: 1 } } },
});
t.teardown(() => app.close());
// Random weights: it rarely emits an end token, so a long num_predict really runs long.
await createModel(app, 'a', 'gguf/bench-random-135m-q4_0.gguf');
await createModel(app, 'b', 'gguf/stories260K-chatml.gguf');
const ollama = ollamaClient(app);
const engine = app.hooks.extensions.get('inference') as EngineService;
const names = async () => (await ollama.ps()).models.map((m) => m.name);

/** Starts a streaming generation and resolves once its first chunk has arrived. */
async function startStream(model: string, numPredict: number, options: Record<string, unknown> = {}) {
  const ctl = new AbortController();
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    signal: ctl.signal,
    body: JSON.stringify({ model, prompt: 'Once upon a time', options: { num_predict: numPredict, temperature: 1, ...options } }),
  });
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  const rest = (async () => {
    let text = '';
    const decoder = new TextDecoder();
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value);
    } catch {
      return 'aborted';
    }
    return text;
  })();
  return { status: res.status, abort: () => ctl.abort(), rest };
}

t.test('slots, queue and 503; a client that leaves frees its slot at once', async (t) => {
  const long1 = await startStream('a', 1900);
  const long2 = await startStream('a', 1900);
  t.equal(long1.status, 200);
  t.equal(long2.status, 200, 'two requests share the model at once');

  const queued = [1, 2].map(() => ollama.generate({ model: 'a', prompt: 'Hi', options: { num_predict: 3 } }));
  while (engine.stats().queued < 2) await sleep(20);
  t.match(engine.stats(), { queued: 2, active: 2 });
  const busy = await app.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'a', prompt: 'Hi', stream: false, options: { num_predict: 1 } }),
  });
  t.equal(busy.status, 503, 'past the queue: 503');
  // One request has left the queue with a slot in the last minute (the first, which waited for
  // the load): two queued at one a minute is past the 60 s bound (test/engine/drain.test.ts).
  t.equal(busy.headers.get('retry-after'), '60');
  t.match(await busy.json(), { error: /server busy/ });

  long1.abort();
  t.equal(await long1.rest, 'aborted');
  const first = await queued[0]!;
  t.equal(first.done, true, 'a queued request got the freed slot');
  long2.abort();
  t.equal(await long2.rest, 'aborted');
  const second = await queued[1]!;
  t.equal(second.done, true, 'the other queued request got the slot the second abort freed');
  t.ok(second.eval_count > 0, 'and generated');
  t.same(await names(), ['a:latest']);
});

t.test('keep_alive: the model goes when it expires', async (t) => {
  await ollama.generate({ model: 'a', prompt: 'Hi', keep_alive: 1, options: { num_predict: 1 } });
  t.same(await names(), ['a:latest']);
  // When exactly is the unit test's (scheduler.test.ts, mock timers); here: that the real runner goes.
  const deadline = Date.now() + 60_000;
  while ((await names()).length > 0 && Date.now() < deadline) await sleep(100);
  t.same(await names(), [], 'unloaded once its 1 s keep_alive ran out');
});

t.test('a new model evicts an idle one, but waits for one in use', async (t) => {
  await ollama.generate({ model: 'a', prompt: '', keep_alive: -1 });
  await ollama.chat({ model: 'b', messages: [], keep_alive: -1 });
  t.same(await names(), ['b:latest'], 'an idle model, even a keep-forever one, makes room');

  const busy = await startStream('b', 40);
  const other = ollama.generate({ model: 'a', prompt: 'Hi', options: { num_predict: 2 } });
  const text = await busy.rest;
  t.match(text, /"done":true/, 'the model in use finished its answer');
  t.notMatch(text, /"error"/, 'no error line');
  t.equal((await other).done, true, 'then the other model was loaded');
  t.same(await names(), ['a:latest']);
});

t.test('num_ctx: a model is loaded again only to grow its context; a smaller ask is served as loaded', async (t) => {
  const context = async () => ((await ollama.ps()).models.find((m) => m.name === 'b:latest') as { context_length?: number } | undefined)?.context_length;
  const ask = (numCtx?: number) => ollama.generate({ model: 'b', prompt: 'Once', options: { num_predict: 1, ...(numCtx ? { num_ctx: numCtx } : {}) } });
  await ask();
  t.equal(await context(), 2048, "the engine's 4096 clamped to the model's trained 2048");
  t.notOk((await ask(4096)).load_duration, 'a larger num_ctx than the model has: no reload (no load_duration)');
  t.notOk((await ask(256)).load_duration, 'a smaller num_ctx: served by the larger context');
  t.equal(await context(), 2048);

  await ollama.generate({ model: 'b', prompt: '', keep_alive: 0 });
  t.ok((await ask(256)).load_duration > 0, 'loaded with the num_ctx of the request that loads it');
  t.equal(await context(), 256);
  t.ok((await ask(512)).load_duration > 0, 'a larger num_ctx: loaded again');
  t.equal(await context(), 512);
  t.ok((await ask()).load_duration > 0, 'no num_ctx on a model loaded smaller than the default: loaded again');
  t.equal(await context(), 2048);

  const busy = await startStream('b', 200, { seed: 7 });
  const during = await ask(512);
  t.equal(during.done, true, 'a request with a smaller num_ctx while the model is busy is answered');
  t.notOk(during.load_duration, 'by the loaded model');
  t.match(await busy.rest, /"done":true/);
});

t.test('two clients: a num_ctx of 512 streaming does not refuse a longer prompt without num_ctx', async (t) => {
  await ollama.generate({ model: 'b', prompt: '', keep_alive: 0 });
  const small = await startStream('b', 400, { num_ctx: 512, seed: 7 });
  t.equal(small.status, 200);
  t.equal(engine.stats().active, 1, 'the 512-token client holds its slot');
  const pending = ollama.generate({ model: 'b', prompt: 'Once upon a time there was a little girl. '.repeat(60), options: { num_predict: 2 } });
  while (engine.stats().queued < 1) await sleep(10);
  const later = await ollama.generate({ model: 'b', prompt: 'Once', options: { num_predict: 1, num_ctx: 512 } });
  t.ok(later.load_duration > 0, 'a request arriving meanwhile queued behind the reload (a free slot notwithstanding)');
  const long = await pending;
  t.ok(long.prompt_eval_count > 512, `a prompt of ${long.prompt_eval_count} tokens was answered`);
  t.ok(long.load_duration > 0, 'after the model was loaded again, once the stream had ended');
  t.match(await small.rest, /"done":true/, 'the streaming client got its whole answer');
  t.notMatch(await small.rest, /"error"/);
  t.equal(((await ollama.ps()).models[0] as { context_length?: number }).context_length, 2048);
});

t.test('deleting a loaded model unloads it first', async (t) => {
  await createModel(app, 'c', 'gguf/stories260K.gguf');
  await ollama.generate({ model: 'c', prompt: '', keep_alive: -1 });
  t.same(await names(), ['c:latest']);
  const res = await app.fetch('/api/delete', { method: 'DELETE', body: JSON.stringify({ model: 'c' }) });
  t.equal(res.status, 200);
  t.same(await names(), []);
});

t.test('svc-inference stopped: 503; started again: answers', async (t) => {
  await app.hooks.services.stop('svc-inference');
  const res = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'a', prompt: 'Hi' }) });
  t.equal(res.status, 503);
  t.match(await res.json(), { error: /svc-inference is stopped/ });
  await app.hooks.services.start('svc-inference');
  t.equal((await ollama.generate({ model: 'a', prompt: 'Hi', options: { num_predict: 1 } })).done, true);
});
