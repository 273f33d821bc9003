/**
 * Slot placement for one llama-server, and the requests run on the slots, by the engines' one
 * policy (`chooseSlot` of `lia/gguf`, plugins/gguf/slots/slot-choice.ts). The server keeps each
 * slot's last prompt in its KV cache and reuses the longest common prefix of the next prompt sent
 * to that slot, so the appliance picks the slot itself (the request's `id_slot`) from what it sent
 * each slot. What is llama-server's own here:
 *
 * - how a prompt is measured: as the canonical JSON of what the server renders into the prompt
 *   (tools, template switches, then the messages or the raw prompt), character by character, at
 *   {@link CHARS_PER_TOKEN} characters a token: the chat template renders those in order, so a
 *   common JSON prefix is a common token prefix up to the message where they differ;
 * - what a slot's state is ({@link SlotTable}): a slot's prompt counts as held from the moment it
 *   is sent (`evaluating` until its first event), and a slot whose request failed before that
 *   counts as empty;
 * - what a pick asks of the server ({@link SlotRequests}): a donor's cache copied through a slot
 *   snapshot; a new conversation's long prompt evaluated first, so that others arriving with it
 *   can copy it; long prompts sent one after another. The answer's events are read with the
 *   `openai-wire` plugin's codec.
 *
 * @module
 */
import { unlink } from 'node:fs/promises';
import path from 'node:path';
import { Errors } from 'lia/plugin';
import type { GenerationEvent } from 'lia/engine';
import { openaiWire, streamLines, type WireCall } from 'lia/openai-wire';
import { CHARS_PER_TOKEN, chooseSlot, takesTurn, worthCopying, type Donor, type PromptFacts } from 'lia/gguf';
import type { LlamaServer } from './server.js';
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
  /** A new conversation's long prompt that others may share (`SlotChoice.opens`): {@link SlotRequests} evaluates it first. */
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
/** A slot snapshot shared by the requests that copy the same donor at once. */
interface Snapshot {
  file: string;
  /** The donor's prompt when it was saved. */
  key: string;
  saved: Promise<void>;
  users: number;
}

/** What a priming request ({@link SlotRequests}' `#prime`) found cached and how long it evaluated. */
interface Primed {
  cached: number;
  promptEvalNs: number;
}

/** The requests of one generation server, each placed on a slot and streamed. */
export class SlotRequests {
  readonly #slots: SlotTable;
  readonly #snapshots = new Map<Slot, Snapshot>();
  /** Settles when the last long prompt queued ({@link #queuePrompt}) has been evaluated. */
  #promptLine: Promise<void> = Promise.resolve();
  #files = 0;

  /** `slotDir`: where the server saves slot snapshots; without one (no `--slot-save-path`), no prompt is copied or primed. */
  constructor(
    readonly server: LlamaServer,
    readonly slotDir: string | undefined,
  ) {
    this.#slots = new SlotTable(server.slots);
  }

  /** The events of one request; `build` runs at the first step, so its 400s reach the consumer as the stream's error. */
  async *run(build: () => WireCall, logprobs: number | undefined, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const call = build();
    const started = process.hrtime.bigint();
    // Ends the request when the consumer stops early (the client went away, a stop sequence).
    const own = new AbortController();
    const sig = AbortSignal.any([signal, own.signal]);
    const key = promptKey(call);
    const shareable = !key.includes('"image_url"') && this.slotDir !== undefined;
    const placed = this.#slots.acquire(key, shareable);
    let evaluated = false;
    let primed: Primed | undefined;
    let gate: { turn: Promise<void>; done: () => void } | undefined;
    try {
      if (placed) {
        let turn = placed.takesTurn;
        if (placed.donor) {
          const prompt = promptFacts(key, shareable);
          const holds = await this.#copy(placed.donor, placed.slot, placed.held, key, prompt, sig);
          turn = takesTurn(key.length - holds, prompt);
        } else if (placed.opens) {
          // A new conversation's long prompt (its slot held less than half of it), which others may share.
          primed = await this.#prime(call, placed.slot, sig);
        }
        if (turn) {
          gate = this.#queuePrompt();
          await Promise.race([gate.turn, aborted(sig)]);
        }
        call.body['id_slot'] = placed.slot.id;
        call.body['cache_prompt'] = true;
      }
      const res = await this.server.send('POST', call.path, call.body, sig);
      try {
        for await (const event of openaiWire.events(streamLines(res.body), started, logprobs)) {
          if (!evaluated && placed) this.#slots.evaluated(placed.slot);
          gate?.done();
          evaluated = true;
          // What the client is told is the prompt's evaluation, priming included.
          if (event.type === 'done' && primed) {
            yield { ...event, cachedTokens: primed.cached, promptEvalNs: event.promptEvalNs + primed.promptEvalNs };
            continue;
          }
          yield event;
        }
      } catch (err) {
        if (sig.aborted) throw signal.reason ?? err;
        if ((err as { code?: string }).code === 'LIA_ERR_BAD_GATEWAY' || !(err as { statusCode?: number }).statusCode) {
          throw Errors.engineFailed(`llama-server broke off its answer: ${(err as Error).message}`);
        }
        throw err;
      }
    } finally {
      own.abort();
      gate?.done();
      if (placed) this.#slots.release(placed.slot, evaluated);
    }
  }

  /**
   * A place in the line of long prompts: `turn` settles once every long prompt queued before has
   * been evaluated (its first event) or ended; call `done` when this one has. Several prompts sent
   * together share each decode and all wait for the last of them; one after another, the first
   * answers after its own evaluation, the next after two, and conversations that arrived together
   * fall out of step instead of meeting again at every turn.
   */
  #queuePrompt(): { turn: Promise<void>; done: () => void } {
    const turn = this.#promptLine;
    let done!: () => void;
    this.#promptLine = new Promise<void>((resolve) => (done = resolve));
    return { turn, done };
  }

  /**
   * Evaluates a long prompt that no slot holds (a new conversation's: not a turn that continues
   * its slot, which nobody else shares) on its own first (`n_predict: 0`), so that the slot
   * is idle once the prompt is in its cache: requests that share the prompt's beginning and arrive
   * meanwhile copy it then ({@link #copy} saves a slot only while it is idle), before this request
   * takes the slot again to generate, evaluating one token anew. Costs one round trip per such
   * prompt, and saves each conversation arriving together the evaluation of what they share.
   */
  async #prime(call: WireCall, slot: Slot, signal: AbortSignal): Promise<Primed> {
    const { stream: _stream, stream_options: _options, ...body } = call.body;
    const answer = (await this.server.fetchJson('POST', call.path, { ...body, stream: false, n_predict: 0, id_slot: slot.id, cache_prompt: true }, signal)) as {
      usage?: { prompt_tokens_details?: { cached_tokens?: number } };
      timings?: { cache_n?: number; prompt_ms?: number };
    };
    this.#slots.evaluated(slot);
    // Requests waiting for this prompt start their snapshot now; the slot stays idle until it is saved.
    await new Promise((resolve) => setImmediate(resolve));
    await this.#snapshots.get(slot)?.saved.catch(() => undefined);
    return {
      cached: answer.usage?.prompt_tokens_details?.cached_tokens ?? answer.timings?.cache_n ?? 0,
      promptEvalNs: Math.round((answer.timings?.prompt_ms ?? 0) * 1e6),
    };
  }

  /**
   * Copies `donor`'s state into `slot` once the donor's prompt is evaluated, when it is still worth
   * it (`worthCopying`: it holds enough more of `key` than the `held` characters the slot had). Requests copying the same donor at once share one snapshot file,
   * removed when the last of them has restored it. A failed copy only costs the evaluation.
   */
  async #copy(donor: Slot, slot: Slot, held: number, key: string, prompt: PromptFacts, signal: AbortSignal): Promise<number> {
    await Promise.race([donor.evaluated, aborted(signal)]);
    const shared = commonPrefix(donor.key, key);
    if (!worthCopying(shared, held, prompt)) return held;
    let snap = this.#snapshots.get(donor);
    const fresh = !snap || snap.key !== donor.key;
    if (!snap || fresh) {
      const file = `slot${donor.id}-${++this.#files}.bin`;
      const made: Snapshot = { file, key: donor.key, saved: Promise.resolve(), users: 0 };
      snap = made;
      this.#snapshots.set(donor, made);
    }
    const current = snap;
    current.users++;
    try {
      if (fresh) current.saved = this.server.saveSlot(donor.id, current.file, signal);
      await current.saved;
      await this.server.restoreSlot(slot.id, current.file, signal);
      return shared;
    } catch (err) {
      if (signal.aborted) throw err;
      // The request goes on and evaluates its prompt; the next copy saves afresh.
      if (this.#snapshots.get(donor) === current) this.#snapshots.delete(donor);
      return held;
    } finally {
      if (--current.users === 0) {
        if (this.#snapshots.get(donor) === current) this.#snapshots.delete(donor);
        if (this.slotDir) await unlink(path.join(this.slotDir, current.file)).catch(() => undefined);
      }
    }
  }
}

/** Rejects with the signal's reason once it aborts (marked handled: a race may have settled long before). */
function aborted(signal: AbortSignal): Promise<never> {
  const p = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  p.catch(() => undefined);
  return p;
}

/**
 * What of a request the server renders into its prompt, as canonical JSON with the messages (or
 * the raw prompt) last: the text slot placement compares ({@link SlotTable}).
 */
function promptKey(call: WireCall): string {
  const b = call.body;
  // The adapters first: a prompt evaluated under other LoRA scales shares no cache.
  return JSON.stringify([
    call.path,
    b['lora'] ?? null,
    b['chat_template_kwargs'] ?? null,
    b['tools'] ?? null,
    b['grammar'] ?? null,
    b['messages'] ?? b['prompt'] ?? null,
  ]);
}
