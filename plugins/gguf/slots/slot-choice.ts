/**
 * Which slot a request takes, and whose cached prompt it copies: the one policy of both GGUF
 * engines (a llama-server slot; a node-llama-cpp context sequence). An engine keeps each slot's
 * last prompt in its KV cache and reuses the longest common prefix of the next prompt it runs
 * there, so the slot a request lands on decides what it evaluates again. The policy:
 *
 * - **A conversation keeps its slot.** The idle slot whose last prompt the request continues (its
 *   conversation's earlier turn, or the same prompt again), else an empty slot, else the least
 *   recently used one (the lowest free id while other slots are busy, see `pick`). A new conversation does not take over another's slot only because they
 *   share a system prompt (llama-server's own choice, the slot with the most in common, and
 *   node-llama-cpp's former one, any slot holding half the prompt, both cost the other
 *   conversation its history at its next turn).
 * - **A long shared prefix is evaluated once.** When another slot, idle or busy, holds (or is
 *   evaluating) at least {@link MIN_SHARED_TOKENS} more of the prompt than the chosen slot, it is
 *   the donor: the request waits while the donor evaluates that prefix, then its state is copied.
 * - **Long prompts take turns.** A prompt with more than {@link SERIAL_PROMPT_TOKENS} new tokens
 *   (beyond what its slot holds after any copy) goes after the long prompts sent before it.
 *
 * It is pure and generic over what a prompt is: the engine measures every length in its own units
 * (tokens on node-llama-cpp; characters of a canonical JSON rendering on llama-server) and states
 * how many of them make a token ({@link PromptFacts.unitsPerToken}); the thresholds are in tokens.
 * How state is copied is the engine's own mechanics. A wrong choice costs time, never a wrong
 * answer: the engine compares the tokens itself.
 *
 * @module
 */

/**
 * The least a donor must hold beyond the chosen slot's own prefix before its state is copied, in
 * tokens. Below that, evaluating again costs less than waiting for the donor plus the copy (on
 * llama-server a slot save and restore through a file; on node-llama-cpp the sequence's whole KV
 * buffer, tens of megabytes on a 1B model).
 */
export const MIN_SHARED_TOKENS = 256;

/**
 * New tokens of a prompt above which it takes its turn after the long prompts sent before it:
 * shorter ones go at once and share the decodes.
 */
export const SERIAL_PROMPT_TOKENS = 128;

/** What the policy knows of one slot, measured against the request's prompt. */
export interface SlotFacts {
  /** The engine's id for the slot (slot id, sequence id). Ties go to the lowest. */
  readonly id: number;
  /**
   * Units of the request's prompt the slot holds at its start, or will hold once the prompt it is
   * evaluating now is evaluated ({@link evaluating}).
   */
  readonly held: number;
  /**
   * Units of the slot's last prompt a request must hold to continue it: its whole prompt, less any
   * closing the next turn does not repeat. 0 when the slot holds no prompt a request could continue.
   */
  readonly last: number;
  /** Units its cache holds in total; 0 for an empty slot. */
  readonly size: number;
  /** Whether a request is running on it (it can only be a donor). */
  readonly busy: boolean;
  /** Whether {@link held} is still being evaluated there: copying it means waiting for that. */
  readonly evaluating: boolean;
  /** When it was last given a request (a counter; 0 for never). */
  readonly lastUsed: number;
}

/** What the policy knows of the request's prompt and the engine. */
export interface PromptFacts {
  /** The prompt's length, in the engine's units. */
  readonly length: number;
  /** Units per token: 1 on an engine that measures tokens; about {@link CHARS_PER_TOKEN} on one that measures characters. */
  readonly unitsPerToken: number;
  /** False when no state may be copied into the slot (the engine cannot copy, or the prompt has images). */
  readonly shareable: boolean;
}

/**
 * Characters of canonical JSON per token, the ratio an engine that compares characters converts
 * the thresholds by (English text runs about 4 characters a token; JSON escapes add a few).
 */
export const CHARS_PER_TOKEN = 4;

/** The slot to copy a longer prefix from. */
export interface Donor {
  readonly id: number;
  /** Units of the prompt it holds, or will once evaluated. */
  readonly held: number;
  /** Whether those units are still being evaluated: copy only once they are. */
  readonly wait: boolean;
}

/** Where a request goes. */
export interface SlotChoice {
  /** The slot's id. */
  readonly id: number;
  /** Units of the prompt the slot held before it was taken. */
  readonly held: number;
  /** The slot to copy from first, or null. */
  readonly donor: Donor | null;
  /**
   * A new conversation's long prompt (its slot holds less than half of it, nobody holds more)
   * that others may share: an engine that copies only from an idle slot evaluates it on its own
   * first, so the slot can be copied as soon as the prompt is in its cache.
   */
  readonly opens: boolean;
  /** Whether the prompt takes its turn after the long prompts sent before it (assuming the copy succeeds; see {@link takesTurn}). */
  readonly takesTurn: boolean;
}

/**
 * The slot for a request, from the facts of every slot of the engine (busy ones included, as
 * donors); null when every slot is busy (the request waits for one, or the server queues it).
 */
export function chooseSlot(slots: readonly SlotFacts[], prompt: PromptFacts): SlotChoice | null {
  const idle = slots.filter((s) => !s.busy);
  if (idle.length === 0) return null;
  const slot = pick(idle, slots.length > idle.length);
  const donor = prompt.shareable
    ? chooseDonor(
        slots.filter((s) => s.id !== slot.id),
        slot.held,
        prompt,
      )
    : null;
  const min = MIN_SHARED_TOKENS * prompt.unitsPerToken;
  const opens = slots.length > 1 && prompt.shareable && donor === null && prompt.length - slot.held >= min && slot.held * 2 < prompt.length;
  const holds = donor ? donor.held : opens ? prompt.length : slot.held;
  return { id: slot.id, held: slot.held, donor, opens, takesTurn: slots.length > 1 && takesTurn(prompt.length - holds, prompt) };
}

/**
 * The continued slot holding the most; else an empty one; else the least recently used, or the
 * lowest id while others are busy. Why the lowest: both engines keep one KV stream per slot
 * (node-llama-cpp always, llama-server with `--no-kv-unified`), and llama.cpp then decodes busy
 * slots as one micro-batch only where their ids are consecutive. Ties: the lowest id.
 */
function pick(idle: readonly SlotFacts[], othersBusy: boolean): SlotFacts {
  const best = (among: readonly SlotFacts[], key: (s: SlotFacts) => number) =>
    among.reduce((b, s) => (key(s) < key(b) || (key(s) === key(b) && s.id < b.id) ? s : b));
  const continued = idle.filter((s) => s.last > 0 && s.held >= s.last);
  if (continued.length > 0) return best(continued, (s) => -s.held);
  const empty = idle.filter((s) => s.size === 0);
  if (empty.length > 0) return best(empty, () => 0);
  return best(idle, othersBusy ? () => 0 : (s) => s.lastUsed);
}

/**
 * The slot to copy from, for a request whose own slot holds `own` units of its prompt: the other
 * slot that holds (or will hold) the most of it, at least {@link MIN_SHARED_TOKENS} more than
 * `own`. Among equals: one already evaluated, then the one given its request first (a later one
 * may itself be waiting to copy it), then the lowest id. Null when none is worth a copy.
 */
export function chooseDonor(others: readonly SlotFacts[], own: number, prompt: PromptFacts): Donor | null {
  let best: SlotFacts | null = null;
  for (const s of others) {
    if (!worthCopying(s.held, own, prompt)) continue;
    const better =
      !best ||
      s.held > best.held ||
      (s.held === best.held &&
        ((best.evaluating && !s.evaluating) ||
          (best.evaluating === s.evaluating && (s.lastUsed < best.lastUsed || (s.lastUsed === best.lastUsed && s.id < best.id)))));
    if (better) best = s;
  }
  return best && { id: best.id, held: best.held, wait: best.evaluating };
}

/** Whether a donor holding `shared` units of the prompt is worth copying into a slot that holds `own`. */
export function worthCopying(shared: number, own: number, prompt: PromptFacts): boolean {
  return shared >= own + MIN_SHARED_TOKENS * prompt.unitsPerToken;
}

/** Whether a prompt with `fresh` units still to evaluate takes its turn after the long prompts sent before it. */
export function takesTurn(fresh: number, prompt: PromptFacts): boolean {
  return fresh >= SERIAL_PROMPT_TOKENS * prompt.unitsPerToken;
}
