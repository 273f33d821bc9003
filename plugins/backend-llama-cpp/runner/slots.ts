/**
 * The context's sequences as request slots. A request takes a free sequence (see {@link chooseSlot}:
 * the longest cached prefix of its prompt, else the slot whose cache is worth least), waits in line
 * when all are taken, and gives its sequence back once its generation has settled: sequences are
 * never disposed under in-flight work. The set of busy sequences is what a batch waits for (see
 * batching.ts).
 *
 * Prefix sharing: when another sequence, free or busy, holds a longer prefix of the prompt than the
 * one the request took (a system prompt many conversations share), that prefix's KV cache is
 * copied into the request's sequence instead of being evaluated again (see {@link chooseDonor}).
 * When that other sequence is still evaluating a prompt with the same prefix (conversations that
 * arrive together), the request waits for it first: copying takes milliseconds, evaluating a
 * thousand tokens seconds, and on a small machine two evaluations at once take as long as both.
 *
 * @module
 */
import { LlamaChat, LlamaCompletion, type ChatWrapper, type LlamaContext, type LlamaContextSequence, type Token } from 'node-llama-cpp';
import { canCopyPrefix, copyPrefix, sequenceId } from './llama-internals.js';

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

/** What {@link chooseDonor} knows of another sequence. */
export interface DonorCandidate {
  /** Sequence id. */
  index: number;
  /** Tokens of the prompt that its cache already holds. */
  cached: number;
  /** Tokens of the prompt that the prompt it is evaluating now shares (0 when it is not busy). */
  pending: number;
}

/**
 * Fewer tokens than this are evaluated rather than copied: a copy moves the sequence's whole KV
 * buffer (llama.cpp copies between sequences' streams in full), tens of megabytes on a 1B model,
 * which costs about what evaluating a few dozen tokens does.
 */
export const MIN_SHARED_TOKENS = 64;

/**
 * Where a request whose sequence already holds `own` tokens of its prompt gets a longer prefix:
 * the other sequence that holds or will hold the most tokens of it, at least
 * {@link MIN_SHARED_TOKENS} more than `own`; `wait` when those tokens are still being evaluated
 * there (the copy then waits for that evaluation). Ties go to the tokens already cached, then to
 * the lowest sequence id. Null when no sequence is worth copying from.
 */
export function chooseDonor(others: readonly DonorCandidate[], own: number): { index: number; wait: boolean } | null {
  let best: { index: number; wait: boolean; tokens: number } | null = null;
  for (const c of others) {
    const tokens = Math.max(c.cached, c.pending);
    const wait = c.pending > c.cached;
    if (tokens < own + MIN_SHARED_TOKENS) continue;
    const better = !best || tokens > best.tokens || (tokens === best.tokens && ((best.wait && !wait) || (best.wait === wait && c.index < best.index)));
    if (better) best = { index: c.index, wait, tokens };
  }
  return best && { index: best.index, wait: best.wait };
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
  /** When each sequence was last given back (a counter, not a clock). */
  readonly #lastUsed = new Map<number, number>();
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

  /** Takes `count` sequences of `context`, each with a completion and a chat session on it. */
  constructor(context: LlamaContext, count: number, wrapper: ChatWrapper) {
    for (let i = 0; i < count; i++) {
      const seq = context.getSequence();
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
      this.#lastUsed.set(slot.index, ++this.#uses);
      const next = this.#waiting.shift();
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /**
   * Copies the longest prefix of `tokens` that another sequence holds (or is evaluating: then first
   * waits for it) into `slot`, when {@link chooseDonor} finds one worth it. A copy that fails
   * leaves the sequence empty, so the request evaluates its whole prompt as it would have anyway.
   */
  async #sharePrefix(slot: Slot, tokens: Token[], order: number): Promise<void> {
    const own = (): number => slot.seq.compareContextTokens(tokens).firstDifferentIndex;
    const cached = (s: Slot): number => s.seq.compareContextTokens(tokens).firstDifferentIndex;
    const candidates = (): DonorCandidate[] =>
      [...this.#all.values()]
        .filter((s) => s !== slot)
        .map((s) => {
          const pending = this.#prompts.get(s.index);
          const waitable = pending !== undefined && pending.order < order;
          return { index: s.index, cached: cached(s), pending: waitable ? commonPrefix(pending.tokens, tokens) : 0 };
        });
    let donor = chooseDonor(candidates(), own());
    const deadline = Date.now() + MAX_PREFIX_WAIT_MS;
    while (donor?.wait && Date.now() < deadline) {
      // The other request evaluates its prompt in chunks (generation.ts): look again after a while.
      await new Promise((resolve) => setTimeout(resolve, 10));
      donor = chooseDonor(candidates(), own());
    }
    if (!donor) return;
    const source = this.#all.get(donor.index)!;
    const upTo = Math.min(cached(source), tokens.length - 1);
    if (upTo < own() + MIN_SHARED_TOKENS) return;
    // Busy from here: the batch loop then lets go of the context lock the copy needs (batching.ts).
    this.busy.add(slot.index);
    const ok = await copyPrefix(slot.seq, source.seq, upTo).catch(() => false);
    if (!ok && slot.seq.nextTokenIndex > 0) await slot.seq.eraseContextTokenRanges([{ start: 0, end: slot.seq.nextTokenIndex }]);
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
