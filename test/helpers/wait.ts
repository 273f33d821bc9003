/**
 * Waiting for a condition instead of sleeping: tests poll what a user can observe (an HTTP answer,
 * a process list) until it holds, with a generous bound so that a slow or busy machine only makes
 * them slower, never wrong.
 *
 * @module
 */
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** Give up after this long. Defaults to 30 s. */
  timeoutMs?: number;
  /** Pause between two checks. Defaults to 100 ms. */
  intervalMs?: number;
}

/**
 * Calls `check` until it returns something other than `undefined`, `null` or `false`, and returns
 * that. Throws `what` with the last value seen when the bound passes.
 */
export async function waitFor<T>(what: string, check: () => T | Promise<T>, options: WaitOptions = {}): Promise<Exclude<T, undefined | null | false>> {
  const { timeoutMs = 30_000, intervalMs = 100 } = options;
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== null && value !== false) return value as Exclude<T, undefined | null | false>;
    if (Date.now() >= end) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(value)})`);
    await sleep(intervalMs);
  }
}
