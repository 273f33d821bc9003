/**
 * Prompt batches on their own thread count (plugins/backend-llama-cpp/runner/batch-threads.ts):
 * on a real context, the count llama.cpp holds during each decode (read back with the native
 * `getThreads`), and in the appliance, the rule that a runner keeps it only while it is the one
 * model loaded.
 */
import t from 'tap';
import { getLlama, type LlamaContext } from 'node-llama-cpp';
import type { LlamaCppBackend } from '../../plugins/backend-llama-cpp/backend.js';
import { useBatchThreads } from '../../plugins/backend-llama-cpp/runner/batch-threads.js';
import { promptThreads } from '../../plugins/engine/threads.js';
import { fixture } from '../helpers/fixtures.js';
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

t.test('batches with prompt tokens run on the batch count, generation steps on the generation count', async (t) => {
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: fixture('gguf/stories260K.gguf') });
  const context = await model.createContext({ sequences: 4, contextSize: 256, threads: 1 });
  t.teardown(async () => {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  });
  const seen = recordDecodes(context);
  const threads = useBatchThreads(context, 1, 2, 4);
  t.ok(threads, 'the native calls it wraps are there');

  const prompt = model.tokenize('Once upon a time there was a little cat who liked to play in the park with her friends.');
  const [a, b, c, d] = [0, 1, 2, 3].map(() => context.getSequence());
  await a!.evaluateWithoutGeneratingNewTokens(prompt);
  t.same(seen.splice(0), [{ size: prompt.length, threads: 2 }], `a ${prompt.length}-token prompt: 2 threads`);

  // One step of four streams: four tokens, one per sequence, is generation.
  await Promise.all([b, c, d, a].map((s) => s!.evaluateWithoutGeneratingNewTokens([prompt[1]!])));
  const step = seen.splice(0);
  t.equal(step.reduce((n, x) => n + x.size, 0), 4, 'the four tokens were decoded');
  t.same(step.map((x) => x.threads), step.map(() => 1), 'a step of four streams: 1 thread');
  const steps = [];
  for (let i = 0; i < 3; i++) {
    await a!.evaluateWithoutGeneratingNewTokens([prompt[2]!]);
    steps.push(...seen.splice(0));
  }
  t.same(steps, [1, 1, 1].map((threads) => ({ size: 1, threads })), 'one token at a time: 1 thread');

  threads!.set(1);
  await b!.evaluateWithoutGeneratingNewTokens(prompt);
  t.same(seen.splice(0).at(-1), { size: prompt.length, threads: 1 }, 'after set(1), prompts run on 1 thread too');
});

t.test('the automatic batch count is every available core, never fewer than the generation count', async (t) => {
  t.equal(promptThreads(0, 1, 2), 2);
  t.equal(promptThreads(0, 7, 8), 8);
  t.equal(promptThreads(0, 6, 2), 6, 'an explicit generation count above the cores wins');
  t.equal(promptThreads(3, 1, 8), 3, 'a configured count is taken as it is');
});

t.test('a runner keeps its batch count only while it is the one model loaded', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_THREADS: '1', LIA_BATCH_THREADS: '2' } });
  t.teardown(() => app.close());
  await createModel(app, 'first', 'gguf/stories260K.gguf');
  await createModel(app, 'second', 'gguf/stories260K-chatml.gguf');
  const ollama = ollamaClient(app);
  const backend = app.hooks.backends.list().find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
  const counts = () => Object.fromEntries(backend.processes().map((p) => [p.model, p.promptThreads]));

  await ollama.generate({ model: 'first', prompt: 'Once', options: { num_predict: 1 } });
  t.same(counts(), { 'first:latest': 2 }, 'alone: 2');
  await ollama.generate({ model: 'second', prompt: 'Once', options: { num_predict: 1 } });
  t.same(counts(), { 'first:latest': 1, 'second:latest': 1 }, 'two loaded: each its generation count');
  await ollama.generate({ model: 'first', prompt: '', keep_alive: 0 });
  t.same(counts(), { 'second:latest': 2 }, 'alone again: 2');
});
