/**
 * A prompt longer than the loaded context, decided once for every engine. First the context
 * grows, as far as the model and the memory budget allow, instead of failing: coding agents send
 * 15-30k-token prompts to a model loaded with the 4096-token default. The backend refuses such a
 * prompt with `LIA_ERR_CONTEXT_LENGTH_EXCEEDED` before any output; the engine then loads the model
 * again with a larger context (the scheduler reloads it once it is idle, see `Scheduler#tooSmall`)
 * and starts the request over. Each step at least doubles the context and covers the counted
 * prompt plus room for the answer.
 *
 * Growth stops where the backend clamps the context to the model's trained length, where the
 * scheduler finds the larger context over the memory budget, or after {@link MAX_STEPS} steps.
 * There a conversation loses its oldest messages until it fits, as Ollama truncates a chat: system
 * messages and the last message always stay, and when even those do not fit, the request keeps
 * its 400. The prompt is measured by the loaded model (`countChatTokens`: its template, its
 * tokenizer), and the cut is found by bisection (a few measurements, not one per message).
 * Nothing is measured for a prompt that fits.
 *
 * A request whose engine process died before its first event (`AppError.crash`: sent just as the
 * server was killed) is started over once too, on the server the scheduler loads again.
 *
 * @module
 */
import { isAppError } from 'lia/plugin';
import type { LoadedModel } from '../public.js';
import type { ChatMessage, GenerationEvent } from '../public.js';
import type { Lease } from '../scheduler.js';

/** At most this many reloads for one request (4096 → 65536 by doubling). */
const MAX_STEPS = 4;
/** Tokens kept free for the answer when the prompt's length is known. */
const ANSWER_ROOM = 1024;

/** One try: a lease on the model loaded with the asked context, and its events. */
export interface Attempt {
  lease: Lease;
  events: AsyncIterable<GenerationEvent>;
}

/** A chat's conversation, which may lose its oldest messages, and how a loaded model measures one. */
export interface Conversation {
  messages: ChatMessage[];
  /** The prompt's length in tokens on `model` (BOS included), nothing cut; 0 when it cannot say. */
  count(model: LoadedModel, messages: ChatMessage[]): Promise<number>;
}

/**
 * Runs `attempt` (with the context to load, undefined for the request's own, and the messages to
 * send, undefined for the request's) until one's first event is not a context refusal, and
 * returns it with that event put back in front of its stream. Without a `conversation` (generate)
 * nothing is cut.
 */
export async function withContextFit(
  attempt: (contextLength: number | undefined, messages: ChatMessage[] | undefined) => Promise<Attempt>,
  conversation?: Conversation,
): Promise<Attempt> {
  let asked: number | undefined;
  let fitted: ChatMessage[] | undefined;
  let loadedBefore: number | undefined;
  let restarted = false;
  let growing = true;
  for (let step = 0; ; step++) {
    let tried: Attempt;
    try {
      tried = await attempt(asked, fitted);
    } catch (err) {
      // The scheduler refused the larger context (over the memory budget): cut at the one loaded before.
      if (growing && conversation && loadedBefore !== undefined && isContextRefusal(err)) {
        growing = false;
        asked = loadedBefore;
        continue;
      }
      throw err;
    }
    const { lease, events } = tried;
    const iterator = events[Symbol.asyncIterator]();
    let first: IteratorResult<GenerationEvent>;
    try {
      first = await iterator.next();
    } catch (err) {
      const loaded = lease.model.contextLength;
      // The engine died before its first event (a request sent just as its server was killed):
      // once more, on the server the scheduler starts again, as the requests after it get.
      if (isAppError(err) && err.crash && !restarted) {
        restarted = true;
        lease.release();
        continue;
      }
      if (!isContextRefusal(err)) {
        lease.release();
        throw err;
      }
      // Clamped below what was asked: the model's trained context is the limit.
      const clamped = asked !== undefined && loaded < asked;
      if (growing && !clamped && step < MAX_STEPS) {
        const prompt = conversation ? await conversation.count(lease.model, fitted ?? conversation.messages).catch(() => 0) : 0;
        lease.release();
        loadedBefore = loaded;
        asked = Math.max(loaded * 2, nextPowerOfTwo(prompt + ANSWER_ROOM));
        continue;
      }
      const shorter = conversation && fitted === undefined ? await newestThatFit(conversation, lease.model).catch(() => null) : null;
      lease.release();
      if (!shorter) throw err;
      growing = false;
      fitted = shorter;
      asked = loaded;
      continue;
    }
    return { lease, events: prepend(first, iterator) };
  }
}

function isContextRefusal(err: unknown): boolean {
  return isAppError(err) && err.code === 'LIA_ERR_CONTEXT_LENGTH_EXCEEDED';
}

/** The conversation with the fewest oldest messages dropped that fits `model`'s context; null when none does. */
async function newestThatFit(conversation: Conversation, model: LoadedModel): Promise<ChatMessage[] | null> {
  const { messages } = conversation;
  const droppable = messages.flatMap((m, i) => (m.role !== 'system' && i < messages.length - 1 ? [i] : []));
  const without = (n: number): ChatMessage[] => {
    const dropped = new Set(droppable.slice(0, n));
    return messages.filter((_, i) => !dropped.has(i));
  };
  const fits = async (candidate: ChatMessage[]) => {
    const length = await conversation.count(model, candidate);
    return length > 0 && length < model.contextLength;
  };
  if (droppable.length === 0 || !(await fits(without(droppable.length)))) return null;
  // fits(without(hi)) holds and fits(without(lo)) does not (the whole conversation was refused).
  let lo = 0;
  let hi = droppable.length;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (await fits(without(mid))) hi = mid;
    else lo = mid;
  }
  return without(hi);
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
