/**
 * A prompt longer than the loaded context grows the context, as far as the model and the memory
 * budget allow, instead of failing: coding agents send 15-30k-token prompts to a model loaded with
 * the 4096-token default. The backend refuses such a prompt with `LIA_ERR_CONTEXT_LENGTH_EXCEEDED`
 * before any output; the engine then loads the model again with a larger context (the scheduler
 * reloads it once it is idle, see `Scheduler#tooSmall`) and starts the request over. Each step
 * at least doubles the context and covers the counted prompt plus room for the answer; it stops
 * when the backend clamps the context to the model's trained length (the error then says so) or
 * the scheduler finds the larger context does not fit the memory budget.
 *
 * A request whose engine process died before its first event (`AppError.crash`: sent just as the
 * server was killed) is started over once too, on the server the scheduler loads again.
 *
 * @module
 */
import { isAppError, type LoadedModel } from 'lia/plugin';
import type { GenerationEvent } from 'lia/plugin/contracts';
import type { Lease } from './scheduler.js';

/** At most this many reloads for one request (4096 → 65536 by doubling). */
const MAX_STEPS = 4;
/** Tokens kept free for the answer when the prompt's length is known. Defaults to 1024. */
const ANSWER_ROOM = 1024;

/** One try: a lease on the model loaded with `contextLength` (undefined: the request's own) and its events. */
export interface Attempt {
  lease: Lease;
  events: AsyncIterable<GenerationEvent>;
}

/**
 * Runs `attempt` and returns the first one whose first event is not a context refusal, with that
 * event put back in front of its stream. `countPrompt` measures the prompt on the loaded model
 * (chat requests); without it the context doubles.
 */
export async function withContextGrowth(
  attempt: (contextLength: number | undefined) => Promise<Attempt>,
  countPrompt?: (model: LoadedModel) => Promise<number>,
): Promise<Attempt> {
  let asked: number | undefined;
  let restarted = false;
  for (let step = 0; ; step++) {
    const { lease, events } = await attempt(asked);
    const iterator = events[Symbol.asyncIterator]();
    let first: IteratorResult<GenerationEvent>;
    try {
      first = await iterator.next();
    } catch (err) {
      const loaded = lease.model.contextLength;
      // Clamped below what was asked: the model's trained context is the limit, and the error says so.
      const clamped = asked !== undefined && loaded < asked;
      // The engine died before its first event (a request sent just as its server was killed):
      // once more, on the server the scheduler starts again, as the requests after it get.
      if (isAppError(err) && err.crash && !restarted) {
        restarted = true;
        lease.release();
        continue;
      }
      if (!isAppError(err) || err.code !== 'LIA_ERR_CONTEXT_LENGTH_EXCEEDED' || clamped || step >= MAX_STEPS) {
        lease.release();
        throw err;
      }
      const prompt = countPrompt ? await countPrompt(lease.model).catch(() => 0) : 0;
      lease.release();
      asked = Math.max(loaded * 2, nextPowerOfTwo(prompt + ANSWER_ROOM));
      continue;
    }
    return { lease, events: prepend(first, iterator) };
  }
}

function nextPowerOfTwo(n: number): number {
  return n <= 1 ? 1 : 2 ** Math.ceil(Math.log2(n));
}

/** `first`, then the rest of the stream; a consumer that stops early stops the stream too. */
async function* prepend<T>(first: IteratorResult<T>, rest: AsyncIterator<T>): AsyncGenerator<T> {
  try {
    if (first.done) return;
    yield first.value;
    for (let r = await rest.next(); !r.done; r = await rest.next()) yield r.value;
  } finally {
    await rest.return?.();
  }
}
