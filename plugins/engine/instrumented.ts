/**
 * A generation's stream as the engine hands it on: observed for metrics and usage, and its slot
 * and admission released as soon as it is over.
 *
 * @module
 */
import type { GenerationEvent, InferenceEvent } from 'lia/plugin/contracts';
import type { Admitted } from './admission.js';
import type { Lease } from './scheduler.js';

export type Observe = (event: InferenceEvent) => void;

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
            observe({ type: 'finished', model, promptTokens: event.promptTokens, completionTokens: event.completionTokens, ...label });
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
