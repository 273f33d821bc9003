/**
 * Two fixes to how node-llama-cpp 3.22.1 fills a batch, applied by wrapping the context's
 * (internal) `_decodeTokens`; the library has no option for either.
 *
 * 1. "k−1 tokens per decode" (reference §3.4): after each batch, the context re-checks its queue
 *    while the last sequence to finish sampling has not yet re-queued its next token, so that
 *    sequence misses every batch and two concurrent streams never share a decode. Yielding one
 *    macrotask after a batch lets every sequence re-queue first. Measured on stories260K: 4 streams
 *    × 100 tokens took 140 decodes stock, 100 with the fix.
 * 2. Sequence order. The context keeps one KV stream per sequence (`kv_unified = false`), and
 *    llama.cpp then cuts a batch into micro-batches of *consecutive* sequence ids in batch order
 *    (`split_equal`, "sequential"). The library queues tokens in the order the sequences finished
 *    sampling, so 16 streams became up to 16 one-row micro-batches: matrix-vector products instead
 *    of one matrix-matrix product. Keeping the queue sorted by sequence id (and handing out the
 *    lowest free sequence, see session.ts) gives llama.cpp one micro-batch, as llama-server's
 *    slots do. Measured on bench-random-135m, 1 thread, 16 streams: 96 ms per decode before, see
 *    docs/engine.md for after.
 *
 * @module
 */
import type { LlamaContext } from 'node-llama-cpp';

type DecodeOptions = { sequenceId?: number; afterBatchAction?: (sequenceStateLength: number) => unknown } & Record<string, unknown>;
type DecodeFn = (options: DecodeOptions, mapper: unknown) => Promise<unknown>;
type Internal = { _decodeTokens?: DecodeFn; _queuedDecodes?: { sequenceId: number }[] };

/** Applies both fixes to one context; false (and no change) if the library's internals have changed. */
export function fixBatchDispatch(context: LlamaContext): boolean {
  const internal = context as unknown as Internal;
  const original = internal._decodeTokens;
  if (typeof original !== 'function' || !Array.isArray(internal._queuedDecodes)) return false;
  let turn: Promise<void> | null = null;
  const nextTurn = (): Promise<void> =>
    (turn ??= new Promise((resolve) =>
      setImmediate(() => {
        turn = null;
        resolve();
      }),
    ));
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
    const queue = internal._queuedDecodes;
    if (queue && queue.length > 1 && queue.at(-1)!.sequenceId < queue.at(-2)!.sequenceId) queue.sort((a, b) => a.sequenceId - b.sequenceId);
    return queued;
  };
  return true;
}
