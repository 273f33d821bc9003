/**
 * How fast the engine's queue drains, for the `Retry-After` of a 503 past `maxQueue`. The
 * scheduler records each time a waiting request is granted a slot; a client turned away is told to
 * come back once the requests already queued could have left at the rate measured over the last
 * minute. Ollama answers a full queue with 503 "server busy" and no `Retry-After`; llama-server
 * counts the requests it defers (`requests_deferred` in `/metrics`) but turns none away.
 *
 * @module
 */

/** The window the rate is measured over (ms). */
export const DRAIN_WINDOW_MS = 60_000;
/** The bounds of `Retry-After` (s): the upper one is also the answer when nothing drained in the window. */
export const MIN_RETRY_AFTER_S = 1;
export const MAX_RETRY_AFTER_S = 60;

export interface DrainRateOptions {
  /** The clock, in ms. Defaults to `Date.now` (tests pass their own). */
  now?: () => number;
  /** The window in ms. Defaults to {@link DRAIN_WINDOW_MS}. */
  windowMs?: number;
}

/**
 * Releases from the queue over a sliding window. Memory is bounded by the releases of one window
 * (their times), pruned as they age out.
 */
export class DrainRate {
  readonly #now: () => number;
  readonly #windowMs: number;
  /** Release times, oldest first; `#head` is the first one still in the window. */
  #times: number[] = [];
  #head = 0;

  constructor(options: DrainRateOptions = {}) {
    this.#now = options.now ?? (() => Date.now());
    this.#windowMs = options.windowMs ?? DRAIN_WINDOW_MS;
  }

  /** A waiting request left the queue with a slot. */
  record(): void {
    this.#times.push(this.#now());
    this.#prune();
  }

  /** Requests released in the window. */
  released(): number {
    this.#prune();
    return this.#times.length - this.#head;
  }

  /** Requests released per second, averaged over the whole window. */
  perSecond(): number {
    return this.released() / (this.#windowMs / 1000);
  }

  /**
   * Seconds until `queued` requests could have left at the measured rate, rounded up and clamped
   * to {@link MIN_RETRY_AFTER_S}–{@link MAX_RETRY_AFTER_S}; the maximum when nothing drained in the
   * window (every slot is held by a long request, or the model is still loading).
   */
  retryAfterSeconds(queued: number): number {
    const released = this.released();
    if (released === 0) return MAX_RETRY_AFTER_S;
    // queued ÷ (released ÷ window), in integers so that an exact quotient is not rounded up.
    const seconds = Math.ceil((queued * this.#windowMs) / (released * 1000));
    return Math.min(MAX_RETRY_AFTER_S, Math.max(MIN_RETRY_AFTER_S, seconds));
  }

  #prune(): void {
    const oldest = this.#now() - this.#windowMs;
    while (this.#head < this.#times.length && (this.#times[this.#head] as number) <= oldest) this.#head++;
    // Compact once the dead prefix is most of the array, so pruning stays amortised O(1).
    if (this.#head > 1024 && this.#head * 2 > this.#times.length) {
      this.#times = this.#times.slice(this.#head);
      this.#head = 0;
    }
  }
}
