/**
 * Fixes node-llama-cpp 3.22.1's "k−1 tokens per decode" batching (reference §3.4): after each
 * batch, the context re-checks its queue while the last sequence to finish sampling has not yet
 * re-queued its next token, so that sequence misses every batch and two concurrent streams never
 * share a decode. Yielding one macrotask after a batch lets every sequence re-queue first.
 *
 * The library has no option for it, so this wraps the context's (internal) `_decodeTokens` to attach
 * an after-batch action that waits for one `setImmediate`, shared by all items of the batch.
 * Measured on stories260K: 4 streams × 100 tokens took 140 decodes stock, 100 with the fix.
 *
 * @module
 */
import type { LlamaContext } from 'node-llama-cpp';

type DecodeOptions = { afterBatchAction?: (sequenceStateLength: number) => unknown } & Record<string, unknown>;
type DecodeFn = (options: DecodeOptions, mapper: unknown) => Promise<unknown>;

/** Applies the fix to one context; a no-op if the library's internals have changed. */
export function fixBatchDispatch(context: LlamaContext): boolean {
  const internal = context as unknown as { _decodeTokens?: DecodeFn };
  const original = internal._decodeTokens;
  if (typeof original !== 'function') return false;
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
    return original.call(
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
  };
  return true;
}
