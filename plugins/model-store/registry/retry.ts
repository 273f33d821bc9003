/**
 * When a failed download attempt is worth another, and how long to wait before it.
 *
 * @module
 */
import { isAppError } from 'lia/plugin';

/** True for failures worth another attempt (the network, a stall, a 5xx); false for the rest. */
export function retryable(err: unknown): boolean {
  if (isAppError(err)) return err.statusCode >= 500 && err.code !== 'LIA_ERR_INSUFFICIENT_STORAGE';
  const code = (err as NodeJS.ErrnoException)?.code;
  return code !== 'ENOSPC' && code !== 'EDQUOT' && code !== 'ABORT_ERR' && code !== 'LIA_WRITER_GONE';
}

/** Waits 200 ms × 2^`failures` (at most 4 s) before the next attempt; an abort ends the wait. */
export function backoff(failures: number, signal: AbortSignal): Promise<void> {
  const ms = Math.min(4000, 200 * 2 ** failures);
  return new Promise((resolve, reject) => {
    // The signal is the whole download's: each wait's listener goes when the wait ends.
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
