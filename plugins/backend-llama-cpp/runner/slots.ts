/**
 * The context's sequences as request slots. A request takes a free sequence, waits in line when
 * all are taken, and gives its sequence back once its generation has settled: sequences are never
 * disposed under in-flight work. The set of busy sequences is what a batch waits for (see
 * batching.ts).
 *
 * Which sequence, and whose cached prefix it copies, is the engines' one policy (`chooseSlot` and
 * `chooseDonor` of `lia/gguf`, plugins/gguf/slots/slot-choice.ts): the free sequence whose last
 * prompt the request continues, else an empty one, else the least recently used (the lowest free
 * id while others generate, which keeps busy sequences consecutive for batching.ts); a longer prefix another sequence holds or
 * is evaluating is copied in (waiting for that evaluation first) rather than evaluated again.
 * What is node-llama-cpp's own here is the measure (tokens, BOS included) and the mechanics: the
 * copy between sequences (`copyPrefix`, the library's internal `_copyStateFromOtherSequence`),
 * polled while the donor evaluates its prompt in chunks. Long prompts take their turns through
 * the batch order instead of a wait (batching.ts, `stepsThenPrompts`: whole prompts one after
 * another in sequence order, which is the order they were handed out while others generate), and
 * a sequence can be copied while busy, so nothing is evaluated first to make it idle.
 *
 * @module
 */
import { LlamaChat, LlamaCompletion, type ChatWrapper, type LlamaContext, type LlamaContextSequence, type Token, type TokenPredictor } from 'node-llama-cpp';
import { chooseDonor, chooseSlot, MIN_SHARED_TOKENS, worthCopying, type PromptFacts, type SlotFacts } from 'lia/gguf';
import { canCopyPrefix, copyPrefix, sequenceId } from './llama-internals.js';

export interface Slot {
  /** The sequence id in the context (node-llama-cpp hands out the lowest free one: creation order). */
  index: number;
  seq: LlamaContextSequence;
  completion: LlamaCompletion;
  chat: LlamaChat;
}

/** The length of the common start of two token lists. */
function commonPrefix(a: readonly Token[], b: readonly Token[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** How long a request waits at most for another sequence to evaluate the prefix it shares. */
const MAX_PREFIX_WAIT_MS = 120_000;

export class SlotPool {
  readonly #free: Slot[] = [];
  /** When each sequence was last given a request (a counter, not a clock). */
  readonly #lastUsed = new Map<number, number>();
  /** The length of the prompt each sequence was last given (BOS included): what a next turn continues. */
  readonly #lastPrompt = new Map<number, number>();
  #uses = 0;
  readonly #waiting: ((slot: Slot) => void)[] = [];
  /** Sequence ids with a request running. */
  readonly busy = new Set<number>();
  /** Every slot, by sequence id (prefix sharing looks at busy ones too). */
  readonly #all = new Map<number, Slot>();
  /** The prompt each busy sequence is evaluating, and when it was registered (a counter). */
  readonly #prompts = new Map<number, { tokens: Token[]; order: number }>();
  #registered = 0;
  /** Whether prefix sharing is on: the library's copy exists and the model's cache can be copied. */
  readonly sharing: boolean;

  /**
   * Takes `count` sequences of `context`, each with a completion and a chat session on it, and
   * with a token predictor of its own when `predictor` makes them (speculative decoding).
   */
  constructor(context: LlamaContext, count: number, wrapper: ChatWrapper, predictor?: () => TokenPredictor) {
    for (let i = 0; i < count; i++) {
      const seq = context.getSequence(predictor ? { tokenPredictor: predictor() } : {});
      this.#free.push({
        index: sequenceId(seq) ?? i,
        seq,
        completion: new LlamaCompletion({ contextSequence: seq }),
        chat: new LlamaChat({ contextSequence: seq, chatWrapper: wrapper }),
      });
    }
    for (const slot of this.#free) this.#all.set(slot.index, slot);
    const first = this.#free[0]?.seq;
    // Recurrent, hybrid and sliding-window models keep state a copy up to a token cannot cut.
    this.sharing = !!first && canCopyPrefix(first) && !first.needsCheckpoints;
  }

  /**
   * Runs `fn` on a free sequence and always gives it back. `tokens` are the prompt as the sequence
   * will hold it (BOS included), so that a cached prefix is found; empty for no preference.
   */
  async with(tokens: Token[], fn: (slot: Slot) => Promise<void>): Promise<void> {
    const slot = this.#free.length > 0 ? this.#takeBest(tokens) : await new Promise<Slot>((r) => this.#waiting.push(r));
    this.#lastUsed.set(slot.index, ++this.#uses);
    this.#lastPrompt.set(slot.index, tokens.length);
    try {
      // Registered before any wait, in the same synchronous step as the first look for a donor:
      // a request waits only on prompts registered before its own, so no two wait on each other.
      // A request waiting for another's prefix is not yet `busy`: the batch loop (batching.ts)
      // would otherwise hold every decode for it.
      const order = ++this.#registered;
      const share = this.sharing && tokens.length > MIN_SHARED_TOKENS ? this.#sharePrefix(slot, tokens, order) : null;
      this.#prompts.set(slot.index, { tokens, order });
      if (share) await share;
      this.busy.add(slot.index);
      await fn(slot);
    } finally {
      this.#prompts.delete(slot.index);
      this.busy.delete(slot.index);
      const next = this.#waiting.shift();
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /**
   * Copies the longest prefix of `tokens` that another sequence holds (or is evaluating: then first
   * waits for it) into `slot`, when `chooseDonor` finds one worth it. A copy that fails leaves the
   * sequence empty, so the request evaluates its whole prompt as it would have anyway.
   */
  async #sharePrefix(slot: Slot, tokens: Token[], order: number): Promise<void> {
    const prompt = this.#prompt(tokens);
    const own = (): number => slot.seq.compareContextTokens(tokens).firstDifferentIndex;
    const donorOf = () =>
      chooseDonor(
        this.#facts(tokens, order).filter((f) => f.id !== slot.index),
        own(),
        prompt,
      );
    let donor = donorOf();
    const deadline = Date.now() + MAX_PREFIX_WAIT_MS;
    while (donor?.wait && Date.now() < deadline) {
      // The other request evaluates its prompt in chunks (generation.ts): look again after a while.
      await new Promise((resolve) => setTimeout(resolve, 10));
      donor = donorOf();
    }
    if (!donor) return;
    const source = this.#all.get(donor.id)!;
    const upTo = Math.min(source.seq.compareContextTokens(tokens).firstDifferentIndex, tokens.length - 1);
    if (!worthCopying(upTo, own(), prompt)) return;
    // Busy from here: the batch loop then lets go of the context lock the copy needs (batching.ts).
    this.busy.add(slot.index);
    const ok = await copyPrefix(slot.seq, source.seq, upTo).catch(() => false);
    if (!ok && slot.seq.nextTokenIndex > 0) await slot.seq.eraseContextTokenRanges([{ start: 0, end: slot.seq.nextTokenIndex }]);
  }

  /** The policy's facts of a prompt of `tokens` on this context. */
  #prompt(tokens: readonly Token[]): PromptFacts {
    return { length: tokens.length, unitsPerToken: 1, shareable: this.sharing };
  }

  /**
   * What every sequence holds of `tokens`. A prompt another request is evaluating counts only when
   * it was registered before `order` (the request's own), so that no two wait for each other.
   */
  #facts(tokens: readonly Token[], order = Infinity): SlotFacts[] {
    return [...this.#all.values()].map((s) => {
      const cached = tokens.length === 0 ? 0 : s.seq.compareContextTokens(tokens as Token[]).firstDifferentIndex;
      const pending = this.#prompts.get(s.index);
      const coming = pending !== undefined && pending.order < order ? commonPrefix(pending.tokens, tokens) : 0;
      return {
        id: s.index,
        held: Math.max(cached, coming),
        last: this.#lastPrompt.get(s.index) ?? 0,
        size: s.seq.contextTokens.length,
        busy: !this.#free.includes(s),
        evaluating: coming > cached,
        lastUsed: this.#lastUsed.get(s.index) ?? 0,
      };
    });
  }

  /** Takes the free sequence `chooseSlot` picks for a prompt of `tokens`. */
  #takeBest(tokens: Token[]): Slot {
    const choice = chooseSlot(this.#facts(tokens), this.#prompt(tokens))!;
    return this.#free.splice(
      this.#free.findIndex((s) => s.index === choice.id),
      1,
    )[0]!;
  }
}
