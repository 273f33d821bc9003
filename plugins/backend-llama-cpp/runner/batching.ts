/**
 * Three fixes to how node-llama-cpp 3.22.1 fills a batch, applied by wrapping the context's
 * (internal) `_decodeTokens`; the library has no option for any of them.
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
import type { LlamaContext } from 'node-llama-cpp';

/** The longest wait after a batch for busy sequences to queue their next token. */
const MAX_GATHER_MS = 1;
/** At most one lock hand-over (see `yieldLock`) per this many milliseconds. */
const MIN_YIELD_INTERVAL_MS = 10;

type DecodeOptions = { sequenceId?: number; afterBatchAction?: (sequenceStateLength: number) => unknown } & Record<string, unknown>;
type DecodeFn = (options: DecodeOptions, mapper: unknown) => Promise<unknown>;
type Internal = {
  _decodeTokens?: DecodeFn;
  _queuedDecodes?: { sequenceId: number }[];
  _queuedDecodeSequenceIds?: Set<number>;
  _scheduleDecode?: () => void;
};

const nextMacrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Applies the fixes to one context; false (and no change) if the library's internals have changed.
 * `busy` lists the sequence ids with a generation running (fix 3; without it, fix 3 is off).
 */
export function fixBatchDispatch(context: LlamaContext, busy?: () => Iterable<number>): boolean {
  const internal = context as unknown as Internal;
  const original = internal._decodeTokens;
  const queue = internal._queuedDecodes;
  const queuedIds = internal._queuedDecodeSequenceIds;
  const schedule = internal._scheduleDecode;
  const hasNative = typeof (context as unknown as { _ctx?: { decodeBatch?: unknown } })._ctx?.decodeBatch === 'function';
  if (typeof original !== 'function' || !Array.isArray(queue) || !(queuedIds instanceof Set) || typeof schedule !== 'function' || !hasNative) {
    return false;
  }
  const sortQueue = (): void => void queue.sort((a, b) => a.sequenceId - b.sequenceId);
  /**
   * Ends the dispatch loop for a moment: with the queue empty it returns and releases the context
   * lock, which a request that must first trim a stale cache (`eraseContextTokenRanges`) waits
   * for; the loop otherwise keeps the lock for as long as any stream has a token queued, so such a
   * request waited for every running stream to finish. The held decodes are queued again one
   * macrotask later, behind the waiting requests.
   */
  let lastYield = 0;
  const yieldLock = (): void => {
    lastYield = performance.now();
    const held = queue.splice(0);
    for (const q of held) queuedIds.delete(q.sequenceId);
    setImmediate(() => {
      queue.push(...held);
      sortQueue();
      for (const q of held) queuedIds.add(q.sequenceId);
      schedule.call(context);
    });
  };
  const gathered = async (): Promise<void> => {
    const until = performance.now() + MAX_GATHER_MS;
    for (;;) {
      await nextMacrotask();
      if (!busy) return;
      let missing = false;
      for (const id of busy()) if (!queuedIds.has(id)) missing = true;
      if (!missing) return;
      if (performance.now() >= until) {
        if (queue.length > 0 && performance.now() - lastYield > MIN_YIELD_INTERVAL_MS) yieldLock();
        return;
      }
    }
  };
  // One wait per batch: the library runs the items' after-batch actions one after another, so the
  // first one waits and the others of the same batch (same decode count) go straight through.
  let decodes = 0;
  let gatedAt = -1;
  const native = (context as unknown as { _ctx: Record<string, unknown> })._ctx;
  // The library reads `_ctx.<method>` several times per token: bind each method once.
  const bound = new Map<PropertyKey, unknown>();
  (context as unknown as { _ctx: unknown })._ctx = new Proxy(native, {
    get(target, key) {
      const value = target[key as string];
      if (typeof value !== 'function') return value;
      let fn = bound.get(key);
      if (fn === undefined) {
        const method = value as (...a: unknown[]) => unknown;
        fn = key === 'decodeBatch' ? (...args: unknown[]) => (decodes++, method.apply(target, args)) : method.bind(target);
        bound.set(key, fn);
      }
      return fn;
    },
  });
  const nextTurn = async (): Promise<void> => {
    if (gatedAt === decodes) return;
    gatedAt = decodes;
    await gathered();
  };
  internal._decodeTokens = function (options, mapper) {
    const inner = options.afterBatchAction;
    const queued = original.call(
      this,
      {
        ...options,
        async afterBatchAction(length: number) {
          const r = inner?.(length);
          if (r instanceof Promise) await r;
          await nextTurn();
        },
      },
      mapper,
    );
    // The call queued its decode synchronously; keep the queue in sequence order (a stable sort).
    if (queue.length > 1 && queue.at(-1)!.sequenceId < queue.at(-2)!.sequenceId) sortQueue();
    return queued;
  };
  return true;
}
