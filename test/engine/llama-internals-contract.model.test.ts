/**
 * The contract between plugins/backend-llama-cpp/runner/llama-internals.ts and the installed
 * node-llama-cpp: every private member the adapter relies on, exercised on a real model
 * (stories260K, loaded through the public API, one thread). A failure names the release, the
 * member and the runner patch to review; the last check fails while the installed release is not
 * the one the adapter was checked against. How to review a new release: docs/engine.md,
 * "node-llama-cpp internals".
 */
import t, { type Test } from 'tap';
import { getLlama, getModuleVersion, LlamaCompletion, LlamaLogLevel, type LlamaContext, type LlamaModel, type Token } from 'node-llama-cpp';
import {
  canCopyPrefix,
  CHECKED_VERSION,
  copyPrefix,
  hookDecodeQueue,
  sequenceId,
  versionWarning,
  wrapNativeBatch,
  type DecodeQueue,
} from '../../plugins/backend-llama-cpp/runner/llama-internals.js';
import { fixture } from '../helpers/fixtures.js';

const version = await getModuleVersion();
/** An assumption's message: the release, what the adapter relies on, the patch to review when it fails. */
const holds = (what: string, patch: string): string => `node-llama-cpp ${version}: ${what} (if it fails, review ${patch})`;
/** The message of a failure that cannot be an assertion (a hang): the release, what broke, the patch to review. */
const broken = (what: string, patch: string): string => `node-llama-cpp ${version}: ${what}; review ${patch}`;

const llama = await getLlama({ gpu: false, build: 'never', maxThreads: 1, logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: fixture('gguf/stories260K.gguf') });
t.teardown(async () => {
  await model.dispose();
  await llama.dispose();
});

/** A context of `sequences` × 256 tokens on one thread, freed after the test. */
async function contextFor(t: Test, sequences: number): Promise<LlamaContext> {
  const context = await model.createContext({ sequences, contextSize: 256, threads: 1 });
  t.teardown(() => context.dispose());
  return context;
}

/** The prompt's tokens with BOS in front, as a sequence holds them. */
function withBos(m: LlamaModel, text: string): Token[] {
  return [m.tokens.bos!, ...m.tokenize(text)];
}

/** Rejects with `message` when `work` has not settled after `ms` (a hang is a failure, not a stuck test). */
async function settlesWithin<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  try {
    return await Promise.race([work, limit]);
  } finally {
    clearTimeout(timer);
  }
}

t.test('LlamaContext._ctx: the native batch calls, once per batch (batch-threads.ts, batching.ts)', async (t) => {
  const context = await contextFor(t, 1);
  const batches: number[] = [];
  let decodes = 0;
  let threadsDuringDecode = -1;
  const wrapped = wrapNativeBatch(context, (native) => ({
    initBatch: (size) => (batches.push(size), native.initBatch(size)),
    decodeBatch: () => {
      decodes++;
      native.setThreads(2);
      threadsDuringDecode = context.currentThreads;
      return native.decodeBatch();
    },
  }));
  t.ok(
    wrapped,
    holds(
      'LlamaContext._ctx has initBatch, decodeBatch and setThreads',
      'the thread patch in runner/batch-threads.ts and the decode count in runner/batching.ts',
    ),
  );
  const prompt = withBos(model, 'Once upon a time there was a little cat.');
  await context.getSequence().evaluateWithoutGeneratingNewTokens(prompt);
  t.same(
    batches,
    [prompt.length],
    holds('LlamaContext._ctx.initBatch is called once per batch, with its token count', 'the batch size rule in runner/batch-threads.ts'),
  );
  t.equal(decodes, 1, holds('LlamaContext._ctx.decodeBatch is called once per batch', 'runner/batch-threads.ts and the decode count in runner/batching.ts'));
  t.equal(
    threadsDuringDecode,
    2,
    holds('LlamaContext._ctx.setThreads right before decodeBatch sets the count the decode runs on (read back with currentThreads)', 'runner/batch-threads.ts'),
  );
});

t.test('LlamaContextSequence._sequenceId: the id, in creation order (slots.ts)', async (t) => {
  const context = await contextFor(t, 3);
  const ids = [0, 1, 2].map(() => sequenceId(context.getSequence()));
  t.same(
    ids,
    [0, 1, 2],
    holds(
      'LlamaContextSequence._sequenceId is the id, the lowest free one (creation order)',
      'the slot ids in runner/slots.ts (batch order, runner/batching.ts)',
    ),
  );
});

t.test('LlamaContext._decodeTokens and its queue: hooks, order, waits, hand-over (batching.ts)', async (t) => {
  const context = await contextFor(t, 2);
  let decodes = 0;
  let pendingAfterBatch = 0;
  let decodedDuringAfterBatch = 0;
  const queued: { last: number | undefined; listed: boolean }[] = [];
  let handedOver = false;
  /** Takes every queued decode out and puts it back one macrotask later, as batching.ts's `yieldLock` does. */
  const handOver = (queue: DecodeQueue): void => {
    const held = queue.items.splice(0);
    for (const q of held) queue.ids.delete(q.sequenceId);
    setImmediate(() => {
      queue.items.push(...held);
      for (const q of held) queue.ids.add(q.sequenceId);
      queue.schedule();
    });
  };
  const queue = hookDecodeQueue(context, {
    decoding: () => {
      decodes++;
      if (pendingAfterBatch > 0) decodedDuringAfterBatch++;
    },
    queued: (q) => {
      const last = q.items.at(-1)?.sequenceId;
      queued.push({ last, listed: last !== undefined && q.ids.has(last) });
    },
    afterBatch: async (q) => {
      pendingAfterBatch++;
      try {
        // Long enough for the other sequence to sample and queue its next token.
        for (let i = 0; i < 50 && q.items.length === 0; i++) await new Promise((r) => setImmediate(r));
        if (!handedOver && q.items.length > 0) {
          handedOver = true;
          handOver(q);
        }
      } finally {
        pendingAfterBatch--;
      }
    },
  });
  t.ok(
    queue,
    holds(
      'LlamaContext._decodeTokens, _queuedDecodes (an array), _queuedDecodeSequenceIds (a Set) and _scheduleDecode are there',
      'the batch fixes in runner/batching.ts',
    ),
  );
  if (!queue) return;

  const [first, second] = [context.getSequence(), context.getSequence()];
  const prompt = withBos(model, 'Once upon a time');
  // Queued in the same turn, second sequence first: one batch for both.
  await Promise.all([second.evaluateWithoutGeneratingNewTokens(prompt), first.evaluateWithoutGeneratingNewTokens(prompt)]);
  t.same(
    queued.splice(0),
    [
      { last: sequenceId(second), listed: true },
      { last: sequenceId(first), listed: true },
    ],
    holds(
      'a decode is the last item of _queuedDecodes, its sequence in _queuedDecodeSequenceIds, when _decodeTokens returns',
      'the queue sort in runner/batching.ts',
    ),
  );
  t.equal(decodes, 1, holds('two sequences queued in one turn share one decode', 'runner/batching.ts'));

  const tokens = 12;
  const runs = [first, second].map((seq, i) =>
    new LlamaCompletion({ contextSequence: seq }).generateCompletionWithMeta('Once upon a time', { maxTokens: tokens, temperature: 0.8, seed: i }),
  );
  const results = await settlesWithin(
    Promise.all(runs),
    60_000,
    broken(
      'decodes taken out of _queuedDecodes and put back are no longer dispatched by _scheduleDecode (two generations hung)',
      'the lock hand-over (yieldLock) in runner/batching.ts',
    ),
  );
  t.ok(handedOver, 'the queue held a decode after a batch, and it was taken out and put back');
  t.same(
    results.map((r) => r.metadata.stopReason),
    ['maxTokens', 'maxTokens'],
    holds(
      'generations whose decodes were taken out of _queuedDecodes and put back (then _scheduleDecode) finish',
      'the lock hand-over (yieldLock) in runner/batching.ts',
    ),
  );
  t.equal(
    decodedDuringAfterBatch,
    0,
    holds("the dispatch loop awaits each item's afterBatchAction before its next decode", 'the wait after a batch (gathered) in runner/batching.ts'),
  );
});

t.test('LlamaContextSequence._copyStateFromOtherSequence: a prefix copied between sequences (slots.ts)', async (t) => {
  const context = await contextFor(t, 3);
  const [donor, copy, alone] = [context.getSequence(), context.getSequence(), context.getSequence()];
  t.ok(canCopyPrefix(copy), holds('LlamaContextSequence._copyStateFromOtherSequence is there', 'prefix sharing in runner/slots.ts'));
  const text = 'Once upon a time there was a little girl who lived in a village near the forest.';
  const tokens = withBos(model, text);
  await donor.evaluateWithoutGeneratingNewTokens(tokens);
  const upTo = 10;
  t.ok(
    await copyPrefix(copy, donor, upTo),
    holds('_copyStateFromOtherSequence(other, upTo) resolves to true on a plain (non-recurrent) model', 'prefix sharing in runner/slots.ts'),
  );
  t.same(
    { next: copy.nextTokenIndex, tokens: copy.contextTokens },
    { next: upTo, tokens: tokens.slice(0, upTo) },
    holds('_copyStateFromOtherSequence leaves the sequence holding exactly the first upTo tokens of the other', 'prefix sharing in runner/slots.ts'),
  );
  // The copied cache must be the one evaluation would give: the same greedy answer as a sequence that evaluated it all.
  const prompt = model.tokenize(text);
  const options = { maxTokens: 8, temperature: 0 };
  const copied = await new LlamaCompletion({ contextSequence: copy }).generateCompletion(prompt, options);
  const evaluated = await new LlamaCompletion({ contextSequence: alone }).generateCompletion(prompt, options);
  t.equal(copied, evaluated, holds('a sequence continuing from a copied prefix answers as one that evaluated it', 'prefix sharing in runner/slots.ts'));
});

t.test(`the installed release is the one the adapter was checked against (${CHECKED_VERSION})`, async (t) => {
  t.equal(await versionWarning(CHECKED_VERSION), null, 'no warning for the checked release');
  const other = await versionWarning('0.0.0-other');
  t.match(other, /node-llama-cpp 0\.0\.0-other is installed.*checked against 3\.\d+\.\d+/, 'a warning naming both releases for another one');
  t.equal(
    version,
    CHECKED_VERSION,
    `node-llama-cpp ${version} is installed, runner/llama-internals.ts was checked against ${CHECKED_VERSION}: ` +
      'once every check above passes and the batching, batch-threads and engine tests pass, set CHECKED_VERSION (see docs/engine.md)',
  );
});
