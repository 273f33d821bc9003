/**
 * A speech model's passes leave the appliance free to serve other requests: while a long
 * synthesis runs (the designed `bench-vits` fixture, npm run fixtures, which costs what a real
 * VITS costs on a CPU: a pass of seconds for a long sentence), `GET /health` and `GET /api/tags`
 * asked one after the other on the same appliance keep being answered, many of them before the
 * synthesis ends. With the passes on the appliance's own thread, nothing but the few requests
 * that slip in between sentences was answered until the synthesis ended. A model's worker
 * thread that dies mid-synthesis fails that request with a 500 in OpenAI's error shape, and the
 * next request loads the model again.
 */
import { syncBuiltinESMExports } from 'node:module';
import workerThreads from 'node:worker_threads';
import { APIError } from 'openai';
import t from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture } from '../api-openai/openai-client.js';

/** Every worker thread started in this process, to end one as a crash would (the appliance runs in this process). */
const workers: workerThreads.Worker[] = [];
class Recorded extends workerThreads.Worker {
  constructor(...args: ConstructorParameters<typeof workerThreads.Worker>) {
    super(...args);
    workers.push(this);
  }
}
workerThreads.Worker = Recorded;
syncBuiltinESMExports();

const fx = await openaiFixture(t, { vits: await builtFixture('bench-vits') });
const { app, client } = fx;

/** Three long sentences (a pass each, of almost half a minute of audio). */
const SENTENCE = 'THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG AND RUNS AROUND THE OLD RED BARN '.repeat(3).trim();
const LONG = `${SENTENCE}. ${SENTENCE}. ${SENTENCE}.`;
/** Probes answered before the synthesis ends, at least: with the passes on the event loop only a handful are. */
const PROBES = 100;

t.test('while a long synthesis runs, /health and /api/tags keep answering', async (t) => {
  // Loaded first, so the synthesis below is passes only.
  await (await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: 'HELLO.', response_format: 'pcm' })).arrayBuffer();

  const order: string[] = [];
  let synthesized = false;
  const synthesis = client.audio.speech
    .create({ model: 'vits', voice: 'alloy', input: LONG, response_format: 'pcm' })
    .then((res) => res.arrayBuffer())
    .then((body) => {
      synthesized = true;
      order.push('synthesis');
      return body.byteLength;
    });

  const statuses = new Set<number>();
  for (let i = 0; !synthesized; i++) {
    const res = await app.fetch(i % 2 === 0 ? '/health' : '/api/tags');
    await res.arrayBuffer();
    statuses.add(res.status);
    if (!synthesized) order.push(i % 2 === 0 ? 'health' : 'tags');
  }
  const bytes = await synthesis;

  t.ok(bytes > 24000 * 2 * 10, `the synthesis spoke ${(bytes / 48000).toFixed(1)} s of audio`);
  const before = order.indexOf('synthesis');
  t.ok(before >= PROBES, `${before} probes were answered before the synthesis ended (at least ${PROBES})`);
  t.ok(order.slice(0, before).includes('health') && order.slice(0, before).includes('tags'), 'both /health and /api/tags among them');
  t.same([...statuses], [200], 'every probe answered 200');
});

/** A short synthesis, as PCM bytes. */
async function hello(): Promise<number> {
  return (await (await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: 'HELLO.', response_format: 'pcm' })).arrayBuffer()).byteLength;
}

t.test('a worker thread that ends between requests: the next request loads the model again', async (t) => {
  await hello();
  const thread = workers.at(-1);
  if (!thread) return void t.fail('the model runs in no worker thread');
  await thread.terminate();
  t.ok((await hello()) > 0, 'the next request is spoken');
  t.not(workers.at(-1), thread, 'by a new worker thread');
});

t.test('a worker thread that fails mid-synthesis: a 500 in OpenAI shape, and the next request loads the model again', async (t) => {
  await hello();
  const thread = workers.at(-1);
  if (!thread) return void t.fail('the model runs in no worker thread');
  const failed = client.audio.speech.create({ model: 'vits', voice: 'alloy', input: LONG, response_format: 'pcm' }).then(
    () => null,
    (err: unknown) => err,
  );
  // A few probes answered: the request has reached the model's thread.
  for (let i = 0; i < 10; i++) await (await app.fetch('/health')).arrayBuffer();
  // What Node emits when a worker thread throws and ends (ending one from outside mid-pass would
  // take the process down with onnxruntime); the thread itself goes on with its pass, and is
  // ended once that is over.
  const passOver = new Promise((resolve) => thread.once('message', resolve));
  thread.emit('error', new Error('the thread failed'));
  const err = await failed;
  t.ok(err instanceof APIError, 'the request failed');
  if (err instanceof APIError) {
    t.equal(err.status, 500);
    t.match(err.error, { type: 'server_error', message: /model "vits(:latest)?" stopped: the thread failed/ }, 'an engine error in OpenAI shape');
  }
  await passOver;
  await thread.terminate();
  t.ok((await hello()) > 0, 'the next request is spoken');
  t.not(workers.at(-1), thread, 'by a new worker thread');
});
