/**
 * Prefix-aware slot placement for one llama-server. The server keeps each slot's last prompt in
 * its KV cache and reuses the longest common prefix of the next prompt sent to that slot; which
 * slot a request lands on therefore decides what it must evaluate again. The table picks the slot
 * itself (the request's `id_slot`) from what it sent each slot:
 *
 * - the idle slot whose last prompt the request continues (its conversation's earlier turn, or the
 *   same prompt again), else an empty slot, else the least recently used one: a conversation keeps
 *   its slot while others come and go, and a new conversation does not take over another's slot
 *   only because they share a system prompt;
 * - when another slot holds (or is evaluating) a prefix at least {@link MIN_SHARED_CHARS} longer
 *   than the chosen slot does, that slot is the donor: the request waits until the donor's prompt is
 *   evaluated, and its state is copied into the chosen slot (llama-server's slot save and restore)
 *   before the request is sent. Sessions that share a long system prompt then evaluate it once,
 *   whether they arrive together or one after another.
 *
 * Prompts are compared as the canonical JSON of what the server renders into the prompt (tools,
 * template switches, then the messages or the raw prompt), character by character: the chat
 * template renders those in order, so a common JSON prefix is a common token prefix up to the
 * message where they differ. The comparison only steers placement; llama-server still compares
 * the tokens, so a wrong guess costs time, never a wrong answer.
 *
 * @module
 */

/**
 * The least a donor must hold beyond the chosen slot's own prefix before its state is copied, in
 * characters of the canonical prompt (about 500 tokens): below that, evaluating again costs less
 * than a wait for the donor plus a save and a restore.
 */
export const MIN_SHARED_CHARS = 1024;

/**
 * New characters of the canonical prompt (beyond what its slot holds after any copy; about 128
 * tokens of English) above which a prompt waits for the long prompts sent before it to be
 * evaluated (slot-requests.ts): shorter ones go at once and share the decodes.
 */
export const SERIAL_PROMPT_CHARS = 512;

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
}

/** Where a request goes: its slot, and the slot to copy first when another holds more of its prompt. */
export interface Placement {
  slot: Slot;
  /** How much of the request's prompt the slot held before it was taken, in characters. */
  held: number;
  donor: Slot | null;
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
    this.#slots = Array.from({ length: Math.max(1, count) }, (_, id) => ({ id, key: '', busy: false, lastUsed: 0, evaluated: Promise.resolve() }));
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
    const idle = this.#slots.filter((s) => !s.busy);
    if (idle.length === 0) return null;
    const shared = new Map(this.#slots.map((s) => [s, commonPrefix(s.key, key)]));
    const lru = (a: Slot, b: Slot) => (a.lastUsed <= b.lastUsed ? a : b);
    // A slot whose prompt the request continues (its conversation's next turn, the same prompt
    // again); else an empty slot; else the least recently used, whose conversation is given up.
    const continued = idle.filter((s) => s.key !== '' && shared.get(s)! >= s.key.length - CLOSERS);
    const slot =
      continued.length > 0 ? continued.reduce((a, b) => (shared.get(b)! > shared.get(a)! ? b : a)) : (idle.find((s) => s.key === '') ?? idle.reduce(lru));
    const held = shared.get(slot)!;
    let donor: Slot | null = null;
    if (shareable) {
      // The slot holding the most of the prompt; among equals the one filled first, which is the
      // furthest along (a later one may itself be waiting to copy it).
      let best = held + MIN_SHARED_CHARS;
      for (const s of this.#slots) {
        const n = shared.get(s)!;
        if (s !== slot && (n > best || (n === best && donor !== null && s.lastUsed < donor.lastUsed) || (n === best && donor === null))) {
          donor = s;
          best = n;
        }
      }
    }
    slot.busy = true;
    slot.key = key;
    slot.lastUsed = ++this.#clock;
    slot.evaluated = new Promise<void>((resolve) => this.#settle.set(slot, resolve));
    return { slot, held, donor };
  }

  /** The slot's prompt is evaluated: requests waiting to copy it may go on. */
  evaluated(slot: Slot): void {
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
