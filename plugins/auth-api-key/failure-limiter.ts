/**
 * Slows down a client that keeps presenting wrong keys: a token bucket per client address,
 * spent by each failure and refilled over time. When it is empty a wrong key gets 429 with
 * `Retry-After` instead of 401. The right key is checked first and always passes, so clients
 * sharing an address (a NAT, a proxy) with a noisy one are never locked out. Requests without a
 * key are not counted (they guess nothing), and the buckets are bounded so a flood of addresses
 * cannot exhaust memory.
 *
 * @module
 */

export interface FailureLimiterOptions {
  /** Failures allowed in a burst. Defaults to 10. */
  burst: number;
  /** Seconds to earn back one failure. Defaults to 6 (10 per minute). */
  refillSeconds: number;
  /** Addresses tracked at most; the oldest are forgotten first. Defaults to 10000. */
  maxClients?: number;
}

interface Bucket {
  tokens: number;
  updated: number;
}

export class FailureLimiter {
  readonly #buckets = new Map<string, Bucket>();
  readonly #opts: Required<FailureLimiterOptions>;

  constructor(options: FailureLimiterOptions) {
    this.#opts = { maxClients: 10_000, ...options };
  }

  #bucket(client: string, now: number): Bucket {
    let b = this.#buckets.get(client);
    if (!b) {
      b = { tokens: this.#opts.burst, updated: now };
      if (this.#buckets.size >= this.#opts.maxClients) {
        const oldest = this.#buckets.keys().next().value;
        if (oldest !== undefined) this.#buckets.delete(oldest);
      }
      this.#buckets.set(client, b);
    }
    const earned = (now - b.updated) / (this.#opts.refillSeconds * 1000);
    b.tokens = Math.min(this.#opts.burst, b.tokens + earned);
    b.updated = now;
    return b;
  }

  /** Seconds the client must wait before its next try, or 0 when it may try now. */
  retryAfter(client: string, now = Date.now()): number {
    const b = this.#bucket(client, now);
    return b.tokens >= 1 ? 0 : Math.ceil((1 - b.tokens) * this.#opts.refillSeconds);
  }

  /** Records one failure. */
  fail(client: string, now = Date.now()): void {
    const b = this.#bucket(client, now);
    b.tokens = Math.max(0, b.tokens - 1);
  }
}
