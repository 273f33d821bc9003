/**
 * Prompt batches on more CPU threads than generation, as llama.cpp's `n_threads_batch` (llama-server's
 * `-tb`) intends: node-llama-cpp 3.22.1 sets one count for both and has no option for the other.
 *
 * A decode whose batch holds more tokens than the context has sequences carries prompt tokens (a
 * generation step holds at most one token per sequence); it runs on `batch` threads, every other
 * decode on `threads`. Why: a prompt is a matrix-matrix product that a second thread speeds up,
 * while a generation step hands each token to the runner's event loop, the sampler and the API
 * process, which a second spinning llama.cpp thread takes the CPU from. Measured on 2 vCPUs,
 * bench-random-135m, 4 × 2048: a 504-token prompt evaluated at 1,120-1,190 tokens/s on 2 threads
 * against 740-780 on 1, a 1,304-token one at 840-890 against 560-590; generation unchanged
 * (single stream and 4 streams); with generation steps on 2 threads as well, single-stream
 * generation lost a third (see docs/engine.md).
 *
 * The count is applied through the native context's `setThreads` right before each decode, on
 * the event loop's thread, while no decode of this context runs (the library decodes one batch
 * at a time).
 *
 * @module
 */
import type { LlamaContext } from 'node-llama-cpp';

type Native = {
  initBatch?: (size: number) => unknown;
  decodeBatch?: () => Promise<unknown>;
  setThreads?: (threads: number) => unknown;
};

/** Sets the thread count of prompt batches; the count of generation steps stays as loaded. */
export interface BatchThreads {
  set(batch: number): void;
}

/**
 * Wraps the context's native batch calls; null (and no change) if the library's internals are not
 * the expected ones, in which case every decode keeps the context's own count.
 */
export function useBatchThreads(context: LlamaContext, threads: number, batch: number, sequences: number): BatchThreads | null {
  const native = (context as unknown as { _ctx?: Native })._ctx;
  const { initBatch, decodeBatch, setThreads } = native ?? {};
  if (!native || typeof initBatch !== 'function' || typeof decodeBatch !== 'function' || typeof setThreads !== 'function') return null;
  let size = 0;
  // Own properties on the native object shadow its prototype's (read-only) methods for every caller.
  const own = (name: keyof Native, value: unknown): void => void Object.defineProperty(native, name, { value, writable: true, configurable: true });
  own('initBatch', (n: number) => ((size = n), initBatch.call(native, n)));
  own('decodeBatch', () => {
    // Set every time: node-llama-cpp's thread splitter may have set its own count just before, and
    // the native call changes nothing when the count is already the one asked for.
    setThreads.call(native, size > sequences ? batch : threads);
    return decodeBatch.call(native);
  });
  return {
    set(n: number) {
      batch = Math.max(1, Math.trunc(n));
    },
  };
}
