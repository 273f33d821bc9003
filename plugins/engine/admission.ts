/**
 * A request's admission for the principal that asks (`Principal.admit`: rate limits, concurrent
 * streams, a cap on the tokens generated), held from before the model is loaded until the answer
 * is over; and the generation's stream as the engine hands it on, which ends it: observed for
 * metrics and usage (the observers of `hooks.inferenceObservers`), its slot and admission
 * released as soon as it is over.
 *
 * @module
 */
import { currentPrincipal } from 'lia/plugin';
import type { Admission, InferenceEvent, InferenceObserver } from 'lia/plugin/contracts';
import type { GenerationEvent, SamplingOptions } from './public.js';
import type { Lease } from './scheduler.js';

/** The asking principal's admission for one request: its label for events, and its release. */
export interface Admitted {
  label: { principal?: string };
  /** The prompt's tokens as estimated before it was tokenized ({@link estimateTokens}). */
  promptTokens: number;
  /** The request's options, `num_predict` lowered to the principal's cap. */
  options: SamplingOptions;
  /** The request's signal, also aborted when the principal's credential is withdrawn (revoked, rotated). */
  signal: AbortSignal;
  /** Called once the request is over, with the tokens it used when known; idempotent. */
  done: (usedTokens?: number) => void;
  /** {@link done} for a generation: its counts when it reported them, else the estimate and the tokens seen. */
  settle: (counts: { promptTokens: number; completionTokens: number } | null, tokensSeen: number) => void;
  /** Releases, then rethrows (for a failure before the generation starts). */
  fail: (err: unknown) => never;
}

/** A prompt's tokens before it is tokenized: one per 4 characters, rounded up (the usual rule of thumb for BPE vocabularies). */
export function estimateTokens(texts: ReadonlyArray<string | undefined>): number {
  return texts.reduce((sum, t) => sum + Math.ceil((t?.length ?? 0) / 4), 0);
}

/**
 * Admits the request for the current principal (`Principal.admit`: rate limits, concurrent
 * streams, a cap on the tokens generated), which throws to refuse it. Outside a request, or for a
 * principal without limits, everything is admitted. An embedding generates nothing (`maxTokens` 0).
 */
export function admitted(
  model: string,
  promptTokens: number,
  options: SamplingOptions,
  signal: AbortSignal,
  kind: 'generation' | 'embed' = 'generation',
): Admitted {
  const principal = currentPrincipal();
  const embedding = kind === 'embed';
  const asked = embedding ? 0 : options.num_predict !== undefined && options.num_predict >= 0 ? options.num_predict : null;
  const granted = principal?.admit?.(model, { promptTokens, maxTokens: asked });
  const admission: Admission | undefined = typeof granted === 'function' ? { release: granted } : granted;
  const cap = admission?.maxTokens;
  const capped = embedding || cap === undefined || (asked !== null && asked <= cap) ? options : { ...options, num_predict: cap };
  let released = false;
  const done = (usedTokens?: number): void => {
    if (released) return;
    released = true;
    admission?.release(usedTokens);
  };
  return {
    label: principal ? { principal: principal.id } : {},
    promptTokens,
    options: capped,
    signal: principal?.signal ? AbortSignal.any([signal, principal.signal]) : signal,
    done,
    settle: (counts, seen) => done(counts ? counts.promptTokens + counts.completionTokens : promptTokens + seen),
    fail: (err) => {
      done();
      throw err;
    },
  };
}

export type Observe = (event: InferenceEvent) => void;

/**
 * Tells every observer of `observers` of each event. The list is the live one of the hook
 * (`Registry.list`), so a plugin set up after the engine is told too; an observer that throws is
 * ignored (it only counts, and its failure must not touch inference).
 */
export function toObservers(observers: readonly InferenceObserver[]): Observe {
  return (event) => {
    for (const o of observers) {
      try {
        o.onEvent(event);
      } catch {
        // An observer only counts.
      }
    }
  };
}

/**
 * Reports a generation's first token (time since `started`, queue and load included), the gaps
 * between its tokens, and its token counts when it is done. A stream that ends without its `done`
 * event (its client left, the drain aborted it, the engine failed) is reported finished with the
 * tokens it produced and the prompt's estimate, so usage counts what it cost. Text never leaves
 * this function.
 */
export function observed(
  model: string,
  asker: Pick<Admitted, 'label' | 'promptTokens'>,
  started: bigint,
  observe: Observe,
  source: AsyncIterable<GenerationEvent>,
): AsyncIterable<GenerationEvent> {
  const { label } = asker;
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let last: bigint | null = null;
      let tokens = 0;
      let finished = false;
      const cut = () => {
        if (finished) return;
        finished = true;
        observe({ type: 'finished', model, promptTokens: asker.promptTokens, completionTokens: tokens, ...label });
      };
      return {
        async next() {
          let r: IteratorResult<GenerationEvent>;
          try {
            r = await it.next();
          } catch (err) {
            cut();
            throw err;
          }
          if (r.done) {
            cut();
            return r;
          }
          const event = r.value;
          if (event.type === 'token') {
            tokens++;
            const now = process.hrtime.bigint();
            if (last === null) observe({ type: 'first-token', model, seconds: Number(now - started) / 1e9 });
            else observe({ type: 'token-gap', model, seconds: Number(now - last) / 1e9 });
            last = now;
          } else if (event.type === 'done' && !finished) {
            finished = true;
            const draft = event.draft ? { draftTokens: event.draft.tokens, draftAcceptedTokens: event.draft.accepted } : {};
            observe({ type: 'finished', model, promptTokens: event.promptTokens, completionTokens: event.completionTokens, ...draft, ...label });
          }
          return r;
        },
        async return(value?: unknown) {
          cut();
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}

/**
 * Gives the slot back, and tells the principal's admission, as soon as the generation is over: on
 * its `done` event (with its token counts), on an error, or when the consumer stops iterating (also
 * when it never started; then with the tokens seen so far).
 */
export function leased(lease: Lease, settle: Admitted['settle'], source: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let seen = 0;
      return {
        async next() {
          try {
            const r = await it.next();
            if (!r.done && r.value.type === 'token') seen++;
            if (r.done || r.value.type === 'done') {
              lease.release();
              settle(!r.done && r.value.type === 'done' ? r.value : null, seen);
            }
            return r;
          } catch (err) {
            lease.release();
            settle(null, seen);
            throw err;
          }
        },
        async return(value?: unknown) {
          lease.release();
          settle(null, seen);
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}
