/**
 * A named key's limits: requests per minute, tokens per minute and concurrent inference requests.
 * Requests and tokens are token buckets holding a minute's allowance and refilled continuously,
 * so a key may spend its minute in a burst and then gets its allowance back gradually.
 *
 * Tokens are a bound under concurrency: admission reserves what the request may use (its prompt,
 * estimated, plus the tokens it may generate: its `num_predict`/`max_tokens`, or
 * {@link DEFAULT_RESERVED_COMPLETION} when it sets none) and the generation is capped to that
 * reservation; when the request ends the reservation is settled against the tokens it really used
 * (the difference goes back to the bucket, or is taken from it when the prompt was longer than
 * estimated). A reservation never exceeds one minute's allowance, so every request can be admitted
 * once the bucket is full. Every refusal is a 429 whose `Retry-After` (whole seconds) is the time
 * until the bucket holds what this request needs.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { Admission, AdmissionAsk } from 'lia/plugin/contracts';

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

  constructor(
    readonly perMinute: number,
    now: number,
  ) {
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

  /** Takes `amount` (a negative one gives back, up to a full bucket). */
  spend(amount: number, now: number): void {
    this.#refill(now);
    this.#level = Math.min(this.perMinute, this.#level - amount);
  }
}

function tooMany(what: string, seconds: number): Error {
  return Errors.tooManyRequests(`this API key is over its limit of ${what}; retry in ${seconds} s`, {
    headers: { 'Retry-After': String(seconds) },
  });
}

/**
 * Tokens reserved for what a request without `num_predict`/`max_tokens` may generate, on a key
 * with `tokens_per_minute`; its generation is capped there (or at the minute's allowance less the
 * prompt, when that is smaller).
 */
export const DEFAULT_RESERVED_COMPLETION = 1024;

export class KeyLimiter {
  readonly #requests: Bucket | null;
  readonly #tokens: Bucket | null;
  readonly #maxStreams: number | null;
  readonly #clock: () => number;
  #streams = 0;

  /** @param clock milliseconds now; defaults to `Date.now` (tests pass their own). */
  constructor(limits: KeyLimits | null, clock: () => number = Date.now) {
    this.#clock = clock;
    const now = clock();
    this.#requests = limits?.requests_per_minute ? new Bucket(limits.requests_per_minute, now) : null;
    this.#tokens = limits?.tokens_per_minute ? new Bucket(limits.tokens_per_minute, now) : null;
    this.#maxStreams = limits?.concurrent_streams ?? null;
  }

  /** Counts one request; throws a 429 when the key has none left this minute. */
  request(now = this.#clock()): void {
    if (!this.#requests) return;
    const wait = this.#requests.wait(1, now);
    if (wait > 0) throw tooMany(`${this.#requests.perMinute} requests per minute`, wait);
    this.#requests.spend(1, now);
  }

  /**
   * Admits one inference request (a stream free, its tokens reserved) or throws a 429; returns its
   * release, which settles the reservation against the tokens used (absent: the reservation stands).
   */
  admit(ask: AdmissionAsk = { promptTokens: 0, maxTokens: 0 }, now = this.#clock()): Admission {
    if (this.#maxStreams !== null && this.#streams >= this.#maxStreams) throw tooMany(`${this.#maxStreams} concurrent streams`, 1);
    const tokens = this.#tokens;
    let reserved = 0;
    let maxTokens: number | undefined;
    if (tokens) {
      const prompt = Math.max(0, Math.ceil(ask.promptTokens));
      const wanted = prompt + (ask.maxTokens ?? DEFAULT_RESERVED_COMPLETION);
      reserved = Math.min(wanted, tokens.perMinute);
      const wait = tokens.wait(Math.max(reserved, Number.MIN_VALUE), now);
      if (wait > 0) throw tooMany(`${tokens.perMinute} tokens per minute`, wait);
      tokens.spend(reserved, now);
      if (ask.maxTokens !== 0) maxTokens = Math.max(1, reserved - prompt);
    }
    if (this.#maxStreams !== null) this.#streams++;
    let released = false;
    return {
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      release: (usedTokens?: number) => {
        if (released) return;
        released = true;
        if (this.#maxStreams !== null) this.#streams--;
        if (tokens && usedTokens !== undefined) tokens.spend(usedTokens - reserved, this.#clock());
      },
    };
  }
}
