/**
 * The batch fixes of plugins/backend-llama-cpp/runner/batching.ts, on a real context (stories260K,
 * one thread): concurrent streams share each decode, and every batch lists its sequences in
 * ascending id order, which is what lets llama.cpp decode them as one micro-batch. Prompts that
 * share a long prefix and arrive together evaluate it once (runner/slots.ts copies it between
 * sequences) and answer as they would alone.
 */
import t, { type Test } from 'tap';
import { GeneralChatWrapper, getLlama, LlamaCompletion, type BatchItem, type LlamaContext, type Token } from 'node-llama-cpp';
import { fixBatchDispatch, stepsThenPrompts } from '../../plugins/backend-llama-cpp/runner/batching.js';
import { MIN_SHARED_TOKENS } from 'lia/gguf';
import { SlotPool } from '../../plugins/backend-llama-cpp/runner/slots.js';
import { fixture } from '../helpers/fixtures.js';

/** A context of 4 sequences × `contextSize` on stories260K, one thread, freed after the test. */
async function fourSequences(t: Test, contextSize: number): Promise<LlamaContext> {
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: fixture('gguf/stories260K.gguf') });
  const context = await model.createContext({ sequences: 4, contextSize, threads: 1 });
  t.teardown(async () => {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  });
  return context;
}

t.test("a batch takes every stream's step first, then whole prompts in queue order", async (t) => {
  const item = (tokens: number): BatchItem => ({ tokens: Array<Token>(tokens).fill(1 as Token), logits: [], evaluationPriority: 5 });
  const amounts = (sizes: number[], size: number) => stepsThenPrompts({ items: sizes.map(item), size }).map((p) => p.processAmount);
  t.same(amounts([1, 300, 300, 1], 512), [1, 300, 210, 1], 'both steps, the first prompt whole, the second what is left');
  t.same(amounts([300, 300, 300], 512), [300, 212], 'the third prompt waits for the next batch');
  t.same(amounts([1, 1, 1], 2), [1, 1], 'more steps than room: the first ones');
  t.same(amounts([600, 1], 512), [511, 1], 'a prompt longer than the batch leaves room for the step');

  // On a real context: three prompts queued together; the first is evaluated whole in the first decode.
  const llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: 'error' as never });
  const model = await llama.loadModel({ modelPath: fixture('gguf/stories260K.gguf') });
  const context = await model.createContext({
    sequences: 4,
    contextSize: 1024,
    batchSize: 512,
    threads: 1,
    batching: { itemPrioritizationStrategy: stepsThenPrompts },
  });
  t.teardown(async () => {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  });
  t.ok(fixBatchDispatch(context), 'the batch fixes apply');
  const batches: { seq: number; tokens: number }[][] = [];
  const inner = (context as unknown as { _ctx: Record<string, (...a: unknown[]) => unknown> })._ctx;
  (context as unknown as { _ctx: unknown })._ctx = new Proxy(inner, {
    get(target, key) {
      const value = target[key as string];
      if (key === 'initBatch') return (...a: unknown[]) => (batches.push([]), value!.apply(target, a));
      if (key === 'addToBatch')
        return (...a: unknown[]) => (batches.at(-1)!.push({ seq: a[0] as number, tokens: (a[2] as Uint32Array).length }), value!.apply(target, a));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const prompts = [0, 1, 2].map((i) => model.tokenize(`Story ${i}. ${'Once upon a time there was a little girl who had a dog. '.repeat(15)}`));
  t.ok(prompts.every((p) => p.length > 200) && prompts[0]!.length + prompts[1]!.length > 512, `prompts of ${prompts.map((p) => p.length).join(', ')} tokens`);
  const sequences = prompts.map(() => context.getSequence());
  await Promise.all(sequences.map((seq, i) => seq.evaluateWithoutGeneratingNewTokens(prompts[i]!)));
  t.same(
    batches[0],
    [
      { seq: 0, tokens: prompts[0]!.length },
      { seq: 1, tokens: 512 - prompts[0]!.length },
    ],
    'first decode: the first prompt whole, the rest of the batch to the second',
  );
  t.equal(batches.length, 2, 'the three prompts in two decodes');
});

t.test('four streams: one decode per step, sequences in id order in every batch', async (t) => {
  const context = await fourSequences(t, 256);
  t.ok(fixBatchDispatch(context), 'the library internals the fix relies on are there');

  // Record what reaches llama.cpp: the sequence of every batch entry, and each decode.
  const batches: number[][] = [];
  const inner = (context as unknown as { _ctx: Record<string, (...a: unknown[]) => unknown> })._ctx;
  (context as unknown as { _ctx: unknown })._ctx = new Proxy(inner, {
    get(target, key) {
      const value = target[key as string];
      if (key === 'initBatch') return (...a: unknown[]) => (batches.push([]), value!.apply(target, a));
      if (key === 'addToBatch') return (...a: unknown[]) => (batches.at(-1)!.push(a[0] as number), value!.apply(target, a));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });

  const sequences = [0, 1, 2, 3].map(() => context.getSequence());
  const tokens = 40;
  // Start them in reverse order so the library would queue them out of order.
  const runs = [...sequences].reverse().map((seq, i) =>
    new LlamaCompletion({ contextSequence: seq }).generateCompletionWithMeta('Once upon a time', {
      maxTokens: tokens,
      temperature: 0.8,
      seed: i,
    }),
  );
  const results = await Promise.all(runs);
  t.ok(
    results.every((r) => r.metadata.stopReason === 'maxTokens'),
    'every stream generated its tokens',
  );

  const unordered = batches.filter((b) => b.some((s, i) => i > 0 && s < b[i - 1]!));
  t.same(unordered, [], 'no batch lists a higher sequence before a lower one');
  const shared = batches.filter((b) => b.length === 4).length;
  t.ok(shared >= tokens - 2, `the four streams shared ${shared} of ${batches.length} decodes (at least ${tokens - 2})`);
  t.ok(batches.length <= tokens + 3, `${batches.length} decodes for ${tokens} steps of four streams`);
});

t.test('a request on a sequence holding an old answer starts while another stream runs', async (t) => {
  const context = await fourSequences(t, 512);
  const busy = new Set<number>();
  t.ok(
    fixBatchDispatch(context, () => busy),
    'the library internals the fix relies on are there',
  );
  const completions = [0, 1, 2, 3].map(() => new LlamaCompletion({ contextSequence: context.getSequence() }));
  const run = async (i: number, tokens: number) => {
    busy.add(i);
    const started = performance.now();
    let first = 0;
    await completions[i]!.generateCompletionWithMeta('Once upon a time', {
      maxTokens: tokens,
      temperature: 0.8,
      seed: i,
      onToken: () => (first ||= performance.now()),
    });
    busy.delete(i);
    return { started, first, ended: performance.now() };
  };
  // Every sequence ends up holding an answer, which the next prompt must trim under the context lock.
  await Promise.all([0, 1, 2, 3].map((i) => run(i, 200)));
  const long = run(0, 200);
  await new Promise((r) => setTimeout(r, 20));
  const late = await Promise.all([1, 2, 3].map((i) => run(i, 20)));
  const first = await long;
  for (const [i, r] of late.entries()) {
    t.ok(r.first < first.ended, `sequence ${i + 1} got its first token while sequence 0 was still generating`);
  }
});

t.test('prompts sharing a long prefix, arriving together: it is evaluated once and copied', async (t) => {
  const context = await fourSequences(t, 512);
  const pool = new SlotPool(context, 4, new GeneralChatWrapper());
  t.ok(pool.sharing, "the library's copy between sequences is there");
  fixBatchDispatch(context, () => pool.busy);
  let decoded = 0;
  const inner = (context as unknown as { _ctx: Record<string, (...a: unknown[]) => unknown> })._ctx;
  (context as unknown as { _ctx: unknown })._ctx = new Proxy(inner, {
    get(target, key) {
      const value = target[key as string];
      if (key === 'addToBatch') return (...a: unknown[]) => ((decoded += (a[2] as unknown[]).length), value!.apply(target, a));
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  const model = context.model;
  const system = 'Once upon a time there was a little girl who lived in a village near the forest. '.repeat(12);
  const prompts = [0, 1, 2, 3].map((i) => `${system}Story ${i}:`);
  const complete = (prompt: string) => {
    const prompt_ = model.tokenize(prompt);
    const tokens = [model.tokens.bos!, ...prompt_];
    let text = '';
    return pool
      .with(tokens, async (slot) => {
        text = await slot.completion.generateCompletion(prompt_, { maxTokens: 12, temperature: 0 });
      })
      .then(() => ({ text, tokens: tokens.length }));
  };
  const together = await Promise.all(prompts.map(complete));
  const prefix = model.tokenize(system).length;
  t.ok(prefix > MIN_SHARED_TOKENS, `the shared prefix (${prefix} tokens) is long enough to be copied`);
  t.ok(decoded < together.reduce((s, r) => s + r.tokens, 0) - 2 * prefix, `${decoded} tokens decoded: the prefix once, not four times`);
  // The same prompts one at a time in a context of their own: the same answers.
  const single = await model.createContext({ sequences: 1, contextSize: 512, threads: 1 });
  t.teardown(() => single.dispose());
  for (const [i, prompt] of prompts.entries()) {
    const seq = single.getSequence();
    const alone = await new LlamaCompletion({ contextSequence: seq }).generateCompletion(model.tokenize(prompt), { maxTokens: 12, temperature: 0 });
    seq.dispose();
    t.equal(together[i]!.text, alone, `prompt ${i}: the same answer as evaluated alone`);
  }
});
