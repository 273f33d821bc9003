/**
 * The context's sequences as request slots. A request takes a free sequence (see {@link chooseSlot}:
 * the longest cached prefix of its prompt, else the slot whose cache is worth least), waits in line
 * when all are taken, and gives its sequence back once its generation has settled: sequences are
 * never disposed under in-flight work. The set of busy sequences is what a batch waits for (see
 * batching.ts).
 *
 * @module
 */
import { LlamaChat, LlamaCompletion, type ChatWrapper, type LlamaContext, type LlamaContextSequence, type Token } from 'node-llama-cpp';

export interface Slot {
  /** The sequence id in the context (node-llama-cpp hands out the lowest free one: creation order). */
  index: number;
  seq: LlamaContextSequence;
  completion: LlamaCompletion;
  chat: LlamaChat;
}

/** What {@link chooseSlot} knows of a free slot. */
export interface SlotCandidate {
  /** Sequence id. */
  index: number;
  /** Tokens its cache shares with the start of the prompt (BOS included). */
  shared: number;
  /** Tokens in its cache. */
  cached: number;
  /** When it was last given back (a counter); 0 for never. */
  lastUsed: number;
}

/**
 * Which free slot a prompt of `promptLength` tokens takes (the position in `free`):
 * 1. the one whose cache shares the longest prefix with the prompt, when that is at least half
 *    the prompt (llama-server's default `--slot-prompt-similarity` 0.5): only the rest of the
 *    prompt is evaluated (a chat's next turn, a long system prompt). A shorter match (a template's
 *    first tokens) is not worth the cache it would overwrite;
 * 2. else an empty one: nothing cached is lost;
 * 3. else, with no other generation running, the least recently used one, as llama-server does:
 *    the prompts of recent requests stay cached (two users taking turns keep both);
 * 4. else the lowest sequence id: busy sequences stay consecutive, which llama.cpp needs to decode
 *    them as one micro-batch (see batching.ts), and that matters more while several generate.
 * Ties go to the lowest sequence id.
 */
export function chooseSlot(free: readonly SlotCandidate[], promptLength: number, othersBusy: boolean): number {
  const lowest = (pick: (c: SlotCandidate) => number): number => {
    let best = 0;
    free.forEach((c, i) => {
      const a = pick(c);
      const b = pick(free[best]!);
      if (a < b || (a === b && c.index < free[best]!.index)) best = i;
    });
    return best;
  };
  const longest = lowest((c) => -c.shared);
  const shared = free[longest]!.shared;
  if (shared > 1 && shared >= promptLength / 2) return longest;
  const empty = lowest((c) => (c.cached === 0 ? 0 : 1));
  if (free[empty]!.cached === 0) return empty;
  return othersBusy ? lowest(() => 0) : lowest((c) => c.lastUsed);
}

export class SlotPool {
  readonly #free: Slot[] = [];
  /** When each sequence was last given back (a counter, not a clock). */
  readonly #lastUsed = new Map<number, number>();
  #uses = 0;
  readonly #waiting: ((slot: Slot) => void)[] = [];
  /** Sequence ids with a request running. */
  readonly busy = new Set<number>();

  /** Takes `count` sequences of `context`, each with a completion and a chat session on it. */
  constructor(context: LlamaContext, count: number, wrapper: ChatWrapper) {
    for (let i = 0; i < count; i++) {
      const seq = context.getSequence();
      const id = (seq as unknown as { _sequenceId?: unknown })._sequenceId;
      this.#free.push({
        index: typeof id === 'number' ? id : i,
        seq,
        completion: new LlamaCompletion({ contextSequence: seq }),
        chat: new LlamaChat({ contextSequence: seq, chatWrapper: wrapper }),
      });
    }
  }

  /**
   * Runs `fn` on a free sequence and always gives it back. `tokens` are the prompt as the sequence
   * will hold it (BOS included), so that a cached prefix is found; empty for no preference.
   */
  async with(tokens: Token[], fn: (slot: Slot) => Promise<void>): Promise<void> {
    const slot = this.#free.length > 0 ? this.#takeBest(tokens) : await new Promise<Slot>((r) => this.#waiting.push(r));
    this.busy.add(slot.index);
    try {
      await fn(slot);
    } finally {
      this.busy.delete(slot.index);
      this.#lastUsed.set(slot.index, ++this.#uses);
      const next = this.#waiting.shift();
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /** Takes the free sequence {@link chooseSlot} picks for a prompt of `tokens`. */
  #takeBest(tokens: Token[]): Slot {
    const candidates = this.#free.map((slot) => ({
      index: slot.index,
      shared: tokens.length === 0 ? 0 : slot.seq.compareContextTokens(tokens).firstDifferentIndex,
      cached: slot.seq.contextTokens.length,
      lastUsed: this.#lastUsed.get(slot.index) ?? 0,
    }));
    return this.#free.splice(chooseSlot(candidates, tokens.length, this.busy.size > 0), 1)[0] as Slot;
  }
}
