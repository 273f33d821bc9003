/**
 * How a batch is shared between sequences: {@link stepsThenPrompts}, the context's public
 * `batching.itemPrioritizationStrategy`, picks how many tokens of each queued decode go in; the
 * three fixes below, applied through the context's decode queue (`hookDecodeQueue` in
 * llama-internals.ts), fix what the library has no option for.
 *
 * 1. "k−1 tokens per decode": after each batch, the context re-checks its queue
 *    while the last sequence to finish sampling has not yet re-queued its next token, so that
 *    sequence misses every batch and two concurrent streams never share a decode. Yielding one
 *    macrotask after a batch lets every sequence re-queue first. Measured on stories260K: 4 streams
 *    × 100 tokens took 140 decodes stock, 100 with the fix.
 * 2. Sequence order. The context keeps one KV stream per sequence (`kv_unified = false`), and
 *    llama.cpp then cuts a batch into micro-batches of *consecutive* sequence ids in batch order
 *    (`split_equal`, "sequential"). The library queues tokens in the order the sequences finished
 *    sampling, so 16 streams became up to 16 one-row micro-batches: matrix-vector products instead
 *    of one matrix-matrix product. Keeping the queue sorted by sequence id (and handing out the
 *    lowest free sequence while others generate, see `chooseSlot` in slots.ts) gives llama.cpp
 *    one micro-batch, as llama-server's slots do. Measured on bench-random-135m, 1 thread,
 *    16 streams: 96 ms per decode before, see docs/engine.md for after.
 * 3. Drifting groups. Requests arrive a few milliseconds apart, so some streams start one batch
 *    later than others; from then on each group re-queued after its own batch and the groups took
 *    turns, two or three decodes per step for ever (16 streams seen as 12 + 3 + 1). With `busy`
 *    (the sequences that have a generation running), the wait after a batch lasts until every busy
 *    sequence has its next token queued, up to {@link MAX_GATHER_MS}, so the groups merge. A busy
 *    sequence that is still missing then usually waits for the context lock (to trim the previous
 *    answer from its cache before its prompt, `adaptStateToTokens`), which the dispatch loop holds
 *    while any token is queued: the loop is made to hand the lock over (`yieldLock`) so that
 *    request can start. Measured, raw node-llama-cpp, bench-random-135m, 16 requests arriving 1 ms
 *    apart on sequences that held earlier answers: 13 of them waited ~2 s for the first two to
 *    finish and a wave of 16 × 128 tokens took 9.3-11.1 s; with the hand-over all start within
 *    ~0.1 s and a wave takes 6.6-7.0 s.
 *
 * @module
 */
import type { BatchItem, LlamaContext, PrioritizedBatchItem } from 'node-llama-cpp';
import { hookDecodeQueue, type DecodeQueue } from './llama-internals.js';

/**
 * The batch prioritisation of every generation context (llama-server's, whose slots fill a batch
 * the same way): first one token for each queued decode of one token (a stream's next step, so
 * streams never wait for other sequences' prompts), then the prompts, each whole while there is
 * room, in queue order (sequence order, fix 2). Returned in queue order, as llama.cpp needs for one
 * micro-batch (fix 2).
 *
 * Why not the library's default (`maximumParallelism`, an equal share of the batch for every
 * queued decode): several prompts queued together (agents' next turns, arriving within one step)
 * then all finish in the last batch, so every one of them waits for all of them; here the first
 * prompts finish a batch or more earlier, and with batches of 512 tokens four turns of 230 new
 * tokens give two of them their first token after the first decode. The total work is the same.
 */
export function stepsThenPrompts({ items, size }: { items: readonly BatchItem[]; size: number }): PrioritizedBatchItem[] {
  const amounts = new Map<BatchItem, number>();
  let left = size;
  for (const item of items) {
    if (left === 0) break;
    if (item.tokens.length === 1) {
      amounts.set(item, 1);
      left--;
    }
  }
  for (const item of items) {
    if (left === 0) break;
    if (item.tokens.length > 1) {
      const take = Math.min(item.tokens.length, left);
      amounts.set(item, take);
      left -= take;
    }
  }
  return items.filter((item) => amounts.has(item)).map((item) => ({ item, processAmount: amounts.get(item)! }));
}

/** The longest wait after a batch for busy sequences to queue their next token. */
const MAX_GATHER_MS = 1;
/** At most one lock hand-over (see `yieldLock`) per this many milliseconds. */
const MIN_YIELD_INTERVAL_MS = 10;

const nextMacrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Puts the queued decodes in sequence order (a stable sort). */
const sortQueue = ({ items }: DecodeQueue): void => void items.sort((a, b) => a.sequenceId - b.sequenceId);

/**
 * Applies the fixes to one context; false (and no change) if the library's internals have changed
 * (see `hookDecodeQueue` in llama-internals.ts). `busy` lists the sequence ids with a generation
 * running (fix 3; without it, fix 3 is off).
 */
export function fixBatchDispatch(context: LlamaContext, busy?: () => Iterable<number>): boolean {
  /**
   * Ends the dispatch loop for a moment: with the queue empty it returns and releases the context
   * lock, which a request that must first trim a stale cache (`eraseContextTokenRanges`) waits
   * for; the loop otherwise keeps the lock for as long as any stream has a token queued, so such a
   * request waited for every running stream to finish. The held decodes are queued again one
   * macrotask later, behind the waiting requests.
   */
  let lastYield = 0;
  const yieldLock = (queue: DecodeQueue): void => {
    lastYield = performance.now();
    const held = queue.items.splice(0);
    for (const q of held) queue.ids.delete(q.sequenceId);
    setImmediate(() => {
      queue.items.push(...held);
      sortQueue(queue);
      for (const q of held) queue.ids.add(q.sequenceId);
      queue.schedule();
    });
  };
  const gathered = async (queue: DecodeQueue): Promise<void> => {
    const until = performance.now() + MAX_GATHER_MS;
    for (;;) {
      await nextMacrotask();
      if (!busy) return;
      let missing = false;
      for (const id of busy()) if (!queue.ids.has(id)) missing = true;
      if (!missing) return;
      if (performance.now() >= until) {
        if (queue.items.length > 0 && performance.now() - lastYield > MIN_YIELD_INTERVAL_MS) yieldLock(queue);
        return;
      }
    }
  };
  // One wait per batch: the library runs the items' after-batch actions one after another, so the
  // first one waits and the others of the same batch (same decode count) go straight through.
  let decodes = 0;
  let gatedAt = -1;
  const queue = hookDecodeQueue(context, {
    decoding: () => void decodes++,
    queued: (queue) => {
      const { items } = queue;
      if (items.length > 1 && items.at(-1)!.sequenceId < items.at(-2)!.sequenceId) sortQueue(queue);
    },
    afterBatch: async (queue) => {
      if (gatedAt === decodes) return;
      gatedAt = decodes;
      await gathered(queue);
    },
  });
  return queue !== null;
}
