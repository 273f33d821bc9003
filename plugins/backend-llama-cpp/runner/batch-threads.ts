/**
 * Large batches on more CPU threads than small ones, as llama.cpp's `n_threads_batch` (llama-server's
 * `-tb`) intends: node-llama-cpp 3.22.1 sets one count for both and has no option for the other.
 *
 * A decode of {@link minBatchTokens} tokens or more (a prompt, or a generation step of that many
 * streams) runs on `batch` threads, every other decode on `threads`. Why: a large batch is a
 * matrix-matrix product that a second thread speeds up, while a small generation step is short and
 * is followed by hand-overs of each token to the runner's event loop, the sampler and the API
 * process, which a second spinning llama.cpp thread takes the CPU from. llama.cpp itself uses
 * `n_threads_batch` for every batch of more than one token; here 4-token steps were slower that
 * way, while prompts and steps of 8 streams or more were faster on 2 threads (bench/results/2026-11-27-code-notes.md).
 *
 * The count is applied through the native context's `setThreads` right before each decode
 * (`wrapNativeBatch` in llama-internals.ts), on the event loop's thread, while no decode of this
 * context runs (the library decodes one batch at a time).
 *
 * @module
 */
import type { LlamaContext } from 'node-llama-cpp';
import { wrapNativeBatch } from './llama-internals.js';

/** The smallest batch (tokens) that runs on the batch thread count, for a small model. */
export const MIN_BATCH_TOKENS = 8;

/**
 * Weights (bytes) from which a model's generation steps are costly enough that the hand-overs no
 * longer dominate, so steps of two streams or more take the batch count as llama.cpp would: a
 * 1.1B model's 4-stream steps gained from a second thread where a 135M model's lost
 * (bench/results/2026-11-25-performance.md).
 */
export const LARGE_MODEL_BYTES = 400 * 1024 * 1024;

/** The smallest batch that runs on the batch thread count for a model of `modelBytes` weights. */
export function minBatchTokens(modelBytes: number): number {
  return modelBytes >= LARGE_MODEL_BYTES ? 2 : MIN_BATCH_TOKENS;
}

/** Sets the thread count of large batches; the count of small ones stays as loaded. */
export interface BatchThreads {
  set(batch: number): void;
}

/**
 * Wraps the context's native batch calls (`minTokens` defaults to {@link MIN_BATCH_TOKENS}); null
 * (and no change) if the library's internals are not the expected ones, in which case every decode
 * keeps the context's own count.
 */
export function useBatchThreads(context: LlamaContext, threads: number, batch: number, minTokens = MIN_BATCH_TOKENS): BatchThreads | null {
  let size = 0;
  const wrapped = wrapNativeBatch(context, (native) => ({
    initBatch: (n) => ((size = n), native.initBatch(n)),
    decodeBatch: () => {
      // Set every time: node-llama-cpp's thread splitter may have set its own count just before, and
      // the native call changes nothing when the count is already the one asked for.
      native.setThreads(size >= minTokens ? batch : threads);
      return native.decodeBatch();
    },
  }));
  if (!wrapped) return null;
  return {
    set(n: number) {
      batch = Math.max(1, Math.trunc(n));
    },
  };
}
