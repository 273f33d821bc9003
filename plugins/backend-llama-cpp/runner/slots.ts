/**
 * The context's sequences as request slots. A request takes the free sequence whose cached tokens
 * share the longest prefix with its prompt (KV reuse), waits in line when all are taken, and
 * gives its sequence back once its generation has settled: sequences are never disposed under
 * in-flight work. The set of busy sequences is what a batch waits for (see batching.ts).
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

export class SlotPool {
  readonly #free: Slot[] = [];
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
      const next = this.#waiting.shift();
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /**
   * The free sequence whose cached tokens share the longest prefix with `tokens`; among equals the
   * lowest sequence id, so busy sequences stay consecutive and llama.cpp decodes them as one
   * micro-batch (see batching.ts).
   */
  #takeBest(tokens: Token[]): Slot {
    let best = 0;
    let bestLength = -1;
    this.#free.forEach((slot, i) => {
      const length = tokens.length === 0 ? 0 : slot.seq.compareContextTokens(tokens).firstDifferentIndex;
      if (length > bestLength || (length === bestLength && slot.index < this.#free[best]!.index)) {
        best = i;
        bestLength = length;
      }
    });
    return this.#free.splice(best, 1)[0] as Slot;
  }
}
