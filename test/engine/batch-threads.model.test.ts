/**
 * Large batches on their own thread count (plugins/backend-llama-cpp/runner/batch-threads.ts):
 * on a real context, the count llama.cpp holds during each decode (read back with the native
 * `getThreads`), and in the appliance, the rule that a runner keeps it only while it is the one
 * model loaded.
 */
import t from 'tap';
import { getLlama, type LlamaContext } from 'node-llama-cpp';
import type { LlamaCppBackend } from '../../plugins/backend-llama-cpp/backend.js';
import { LARGE_MODEL_BYTES, MIN_BATCH_TOKENS, minBatchTokens, useBatchThreads } from '../../plugins/backend-llama-cpp/runner/batch-threads.js';
import { inferenceBatchThreads } from '../../plugins/engine/threads.js';
import { fixture } from '../helpers/fixtures.js';
import { ON_LLAMA_CPP } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

type Native = Record<string, (...a: unknown[]) => unknown>;

/** Records, for every decode, the batch size and the thread count llama.cpp holds while it runs. */
function recordDecodes(context: LlamaContext): { size: number; threads: number }[] {
  const native = (context as unknown as { _ctx: Native })._ctx;
  const proto = Object.getPrototypeOf(native) as Native;
  const seen: { size: number; threads: number }[] = [];
  let size = 0;
  const own = (name: string, value: unknown) => Object.defineProperty(native, name, { value, writable: true, configurable: true });
  own('initBatch', (n: number) => ((size = n), proto.initBatch!.call(native, n)));
  own('decodeBatch', () => (seen.push({ size, threads: proto.getThreads!.call(native) as number }), proto.decodeBatch!.call(native)));
  return seen;
}

t.test('batches of 8 tokens or more run on the batch count, smaller ones on the other', async (t) => {
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: fixture('gguf/stories260K.gguf') });
  const context = await model.createContext({ sequences: 8, contextSize: 256, threads: 1 });
  t.teardown(async () => {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  });
  t.equal(MIN_BATCH_TOKENS, 8);
  const seen = recordDecodes(context);
  const threads = useBatchThreads(context, 1, 2);
  t.ok(threads, 'the native calls it wraps are there');

  const prompt = model.tokenize('Once upon a time there was a little cat who liked to play in the park with her friends.');
  const sequences = Array.from({ length: 8 }, () => context.getSequence());
  await sequences[0]!.evaluateWithoutGeneratingNewTokens(prompt);
  t.same(seen.splice(0), [{ size: prompt.length, threads: 2 }], `a ${prompt.length}-token prompt: 2 threads`);
  await sequences[1]!.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 7));
  t.same(seen.splice(0), [{ size: 7, threads: 1 }], 'a 7-token prompt: 1 thread');

  // One token for each of 8 sequences at once: the library queues them into one decode.
  await Promise.all(sequences.map((s) => s.evaluateWithoutGeneratingNewTokens([prompt[1]!])));
  t.same(seen.splice(0), [{ size: 8, threads: 2 }], 'a step of eight streams, one 8-token decode: 2 threads');
  for (let i = 0; i < 3; i++) await sequences[0]!.evaluateWithoutGeneratingNewTokens([prompt[2]!]);
  t.same(
    seen.splice(0),
    [1, 1, 1].map((threads) => ({ size: 1, threads })),
    'one stream, one token at a time: 1 thread',
  );

  threads!.set(1);
  await sequences[2]!.evaluateWithoutGeneratingNewTokens(prompt);
  t.same(seen.splice(0), [{ size: prompt.length, threads: 1 }], 'after set(1), prompts run on 1 thread too');
});

t.test('models from LARGE_MODEL_BYTES up put steps of two streams on the batch count', async (t) => {
  t.equal(minBatchTokens(80 * 1024 * 1024), MIN_BATCH_TOKENS, 'a 135M model keeps the 8-token line');
  t.equal(minBatchTokens(LARGE_MODEL_BYTES - 1), MIN_BATCH_TOKENS);
  t.equal(minBatchTokens(620 * 1024 * 1024), 2, 'a 1.1B Q4_0 model: two-token steps already');
});

t.test('the automatic batch count is every available core, never fewer than the generation count', async (t) => {
  t.equal(inferenceBatchThreads(0, 1, 2), 2);
  t.equal(inferenceBatchThreads(0, 7, 8), 8);
  t.equal(inferenceBatchThreads(0, 6, 2), 6, 'an explicit generation count above the cores wins');
  t.equal(inferenceBatchThreads(3, 1, 8), 3, 'a configured count is taken as it is');
});

t.test('a runner keeps its batch count only while it is the one model loaded', async (t) => {
  const app = await startEngineAppliance({ env: { ...ON_LLAMA_CPP, LIA_THREADS: '1', LIA_BATCH_THREADS: '2' } });
  t.teardown(() => app.close());
  await createModel(app, 'first', 'gguf/stories260K.gguf');
  await createModel(app, 'second', 'gguf/stories260K-chatml.gguf');
  const ollama = ollamaClient(app);
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
  const counts = () => Object.fromEntries(backend.processes().map((p) => [p.model, p.currentBatchThreads]));

  await ollama.generate({ model: 'first', prompt: 'Once', options: { num_predict: 1 } });
  t.same(counts(), { 'first:latest': 2 }, 'alone: 2');
  await ollama.generate({ model: 'second', prompt: 'Once', options: { num_predict: 1 } });
  t.same(counts(), { 'first:latest': 1, 'second:latest': 1 }, 'two loaded: each its generation count');
  await ollama.generate({ model: 'first', prompt: '', keep_alive: 0 });
  t.same(counts(), { 'second:latest': 2 }, 'alone again: 2');
});
