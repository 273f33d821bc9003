/**
 * Slot placement for one llama-server, by the engines' one policy (`chooseSlot` of `lia/gguf`,
 * plugins/gguf/slots/slot-choice.ts): the server keeps each slot's last prompt in its KV cache and
 * reuses the longest common prefix of the next prompt sent to that slot, so the table picks the
 * slot itself (the request's `id_slot`) from what it sent each slot. What is llama-server's own
 * here is how a prompt is measured and what a slot's state is:
 *
 * - prompts are compared as the canonical JSON of what the server renders into the prompt (tools,
 *   template switches, then the messages or the raw prompt), character by character, at
 *   {@link CHARS_PER_TOKEN} characters a token: the chat template renders those in order, so a
 *   common JSON prefix is a common token prefix up to the message where they differ;
 * - a slot's prompt counts as held from the moment it is sent (`evaluating` until its first event),
 *   and a slot whose request failed before that counts as empty.
 *
 * The copy itself (slot save and restore) is slot-requests.ts.
 *
 * @module
 */
import { CHARS_PER_TOKEN, chooseSlot, type Donor, type PromptFacts } from 'lia/gguf';

/**
 * Characters that close a canonical prompt (`]]` after the messages, `"]` after a raw prompt): a prompt continues a
 * slot's when it shares all of the slot's but these.
 */
const CLOSERS = 2;

/** One slot of the server, as the appliance last filled it. */
export interface Slot {
  readonly id: number;
  /** The canonical prompt last sent to it ('' while empty). */
  key: string;
  busy: boolean;
  lastUsed: number;
  /** Settles once the slot's current prompt is evaluated (its first event) or its request ended. */
  evaluated: Promise<void>;
  /** Whether its current prompt is still being evaluated. */
  evaluating: boolean;
}

/** Where a request goes: its slot, and the slot to copy first when another holds more of its prompt. */
export interface Placement {
  slot: Slot;
  /** How much of the request's prompt the slot held before it was taken, in characters. */
  held: number;
  donor: Slot | null;
  /** A new conversation's long prompt that others may share (`SlotChoice.opens`): slot-requests.ts evaluates it first. */
  opens: boolean;
  /** Whether it takes its turn after the long prompts sent before it, should the copy succeed. */
  takesTurn: boolean;
}

/** The policy's facts of a canonical prompt; `shareable` false (a prompt with images, no snapshot folder) copies nothing. */
export function promptFacts(key: string, shareable: boolean): PromptFacts {
  return { length: key.length, unitsPerToken: CHARS_PER_TOKEN, shareable };
}

/** Length of the common prefix of two strings. */
export function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

export class SlotTable {
  readonly #slots: Slot[];
  #clock = 0;
  readonly #settle = new Map<Slot, () => void>();

  constructor(count: number) {
    this.#slots = Array.from({ length: Math.max(1, count) }, (_, id) => ({
      id,
      key: '',
      busy: false,
      lastUsed: 0,
      evaluated: Promise.resolve(),
      evaluating: false,
    }));
  }

  get size(): number {
    return this.#slots.length;
  }

  /**
   * Picks a slot for a request whose canonical prompt is `key` and marks it busy with that prompt;
   * null when every slot is busy (the server queues the request itself then). `shareable` false
   * (a prompt with images) never copies a donor's state.
   */
  acquire(key: string, shareable = true): Placement | null {
    const facts = this.#slots.map((s) => ({
      id: s.id,
      held: commonPrefix(s.key, key),
      last: s.key === '' ? 0 : s.key.length - CLOSERS,
      size: s.key.length,
      busy: s.busy,
      evaluating: s.evaluating,
      lastUsed: s.lastUsed,
    }));
    const choice = chooseSlot(facts, promptFacts(key, shareable));
    if (!choice) return null;
    const slot = this.#slots[choice.id]!;
    slot.busy = true;
    slot.evaluating = true;
    slot.key = key;
    slot.lastUsed = ++this.#clock;
    slot.evaluated = new Promise<void>((resolve) => this.#settle.set(slot, resolve));
    return { slot, held: choice.held, donor: this.#donor(choice.donor), opens: choice.opens, takesTurn: choice.takesTurn };
  }

  #donor(donor: Donor | null): Slot | null {
    return donor ? this.#slots[donor.id]! : null;
  }

  /** The slot's prompt is evaluated: requests waiting to copy it may go on. */
  evaluated(slot: Slot): void {
    slot.evaluating = false;
    this.#settle.get(slot)?.();
    this.#settle.delete(slot);
  }

  /**
   * The slot's request ended. `kept` false (it failed before its prompt was evaluated) forgets what
   * the slot held, so no later request takes it as a donor.
   */
  release(slot: Slot, kept: boolean): void {
    this.evaluated(slot);
    slot.busy = false;
    if (!kept) slot.key = '';
  }
}
