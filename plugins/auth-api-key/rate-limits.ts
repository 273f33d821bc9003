/**
 * A named key's limits: requests per minute, tokens per minute and concurrent inference requests.
 * Requests and tokens are token buckets holding a minute's allowance and refilled continuously,
 * so a key may spend its minute in a burst and then gets its allowance back gradually. Tokens are
 * spent when a generation reports its counts (after the fact), so the bucket may go below zero;
 * new inference requests wait until it is positive again. Every refusal is a 429 with
 * `Retry-After` in whole seconds.
 *
 * @module
 */
import { Errors } from 'lia/plugin';

/** Limits as the API spells them; an absent limit is no limit. */
export interface KeyLimits {
  requests_per_minute?: number;
  tokens_per_minute?: number;
  concurrent_streams?: number;
}

class Bucket {
  #level: number;
  #updated: number;
  readonly #perMs: number;

  constructor(readonly perMinute: number, now: number) {
    this.#level = perMinute;
    this.#updated = now;
    this.#perMs = perMinute / 60_000;
  }

  #refill(now: number): void {
    this.#level = Math.min(this.perMinute, this.#level + (now - this.#updated) * this.#perMs);
    this.#updated = now;
  }

  /** Seconds until the level reaches `need`, 0 when it is there already. */
  wait(need: number, now: number): number {
    this.#refill(now);
    return this.#level >= need ? 0 : Math.max(1, Math.ceil((need - this.#level) / this.#perMs / 1000));
  }

  spend(amount: number, now: number): void {
    this.#refill(now);
    this.#level -= amount;
  }
}

function tooMany(what: string, seconds: number): Error {
  return Errors.tooManyRequests(`this API key is over its limit of ${what}; retry in ${seconds} s`, {
    headers: { 'Retry-After': String(seconds) },
  });
}

export class KeyLimiter {
  readonly #requests: Bucket | null;
  readonly #tokens: Bucket | null;
  readonly #maxStreams: number | null;
  #streams = 0;

  constructor(limits: KeyLimits | null, now = Date.now()) {
    this.#requests = limits?.requests_per_minute ? new Bucket(limits.requests_per_minute, now) : null;
    this.#tokens = limits?.tokens_per_minute ? new Bucket(limits.tokens_per_minute, now) : null;
    this.#maxStreams = limits?.concurrent_streams ?? null;
  }

  /** Counts one request; throws a 429 when the key has none left this minute. */
  request(now = Date.now()): void {
    if (!this.#requests) return;
    const wait = this.#requests.wait(1, now);
    if (wait > 0) throw tooMany(`${this.#requests.perMinute} requests per minute`, wait);
    this.#requests.spend(1, now);
  }

  /** Admits one inference request (tokens left, a stream free) or throws a 429; returns its release. */
  admit(now = Date.now()): () => void {
    if (this.#tokens) {
      const wait = this.#tokens.wait(Number.MIN_VALUE, now);
      if (wait > 0) throw tooMany(`${this.#tokens.perMinute} tokens per minute`, wait);
    }
    if (this.#maxStreams !== null) {
      if (this.#streams >= this.#maxStreams) throw tooMany(`${this.#maxStreams} concurrent streams`, 1);
      this.#streams++;
      return () => void this.#streams--;
    }
    return () => {};
  }

  /** Spends tokens a generation used. */
  spendTokens(count: number, now = Date.now()): void {
    this.#tokens?.spend(count, now);
  }
}
