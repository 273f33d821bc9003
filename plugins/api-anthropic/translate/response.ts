/**
 * Native {@link GenerationEvent}s → an Anthropic `message` (collected) or the events of its
 * stream, shaped as Anthropic's SDKs accumulate them:
 *
 * - `message_start` (the message with empty `content`, `stop_reason: null`), then `ping`;
 * - a thinking model's reasoning (asked for with `thinking`) as a `thinking` block first:
 *   `thinking_delta`s, then an empty `signature_delta` before its stop;
 * - text as a `text` block: `content_block_start` at the first token, `text_delta`s, and
 *   `content_block_stop` when a tool call follows or the turn ends; a turn that wrote no text and
 *   made no call still ends with an empty `text` block, since agents (Claude Code) read the answer
 *   from the last block and fail a message that has none;
 * - each tool call as a `tool_use` block (`toolu_…` id): start with `input: {}`, one
 *   `input_json_delta` carrying the whole input as JSON, stop;
 * - `message_delta` with `stop_reason`, `stop_sequence` and the usage (the prompt's length is
 *   known only once the engine is done, so `input_tokens` comes here and is 0 in
 *   `message_start`), then `message_stop`.
 *
 * `stop_reason`: `tool_use` when a call was made, `max_tokens` when the budget ran out,
 * `stop_sequence` when one of the request's stop sequences ended the text, else `end_turn`.
 * The classes are pure (no I/O): the route feeds them events and writes what they return.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import type { GenerationEvent, ToolCall } from 'lia/engine';

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';

/**
 * Anthropic's usage: `input_tokens` counts the prompt tokens evaluated, `cache_read_input_tokens`
 * those the engine found in its prompt cache (their sum is the prompt's length), and
 * `cache_creation_input_tokens` is always 0: the engine caches every prompt without a separate
 * write. The two cache fields are present when the engine reports its cache.
 */
export interface Usage {
  input_tokens: number;
  cache_creation_input_tokens?: number;
  cache_read_input_tokens?: number;
  output_tokens: number;
}

export type TextBlock = { type: 'text'; text: string };
export type ToolUseBlock = { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };
/** A thinking model's reasoning; `signature` is empty (there is no signed thinking to verify here). */
export type ThinkingBlock = { type: 'thinking'; thinking: string; signature: string };
export type ContentBlock = ThinkingBlock | TextBlock | ToolUseBlock;

/** An Anthropic `message` object. */
export interface Message {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ContentBlock[];
  stop_reason: StopReason | null;
  stop_sequence: string | null;
  usage: Usage;
}

/** One event of a Messages stream (the SSE event name is its `type`). */
export type StreamEvent =
  | { type: 'message_start'; message: Message }
  | { type: 'ping' }
  | { type: 'content_block_start'; index: number; content_block: ContentBlock }
  | {
      type: 'content_block_delta';
      index: number;
      delta:
        | { type: 'text_delta'; text: string }
        | { type: 'thinking_delta'; thinking: string }
        | { type: 'signature_delta'; signature: string }
        | { type: 'input_json_delta'; partial_json: string };
    }
  | { type: 'content_block_stop'; index: number }
  | { type: 'message_delta'; delta: { stop_reason: StopReason; stop_sequence: string | null }; usage: Usage }
  | { type: 'message_stop' };

/** What a response shares: its id and the model name. */
export interface ResponseMeta {
  id: string;
  model: string;
}

/** A fresh id with the given prefix (`msg_`, `toolu_`), 96 random bits. */
export function newId(prefix: string): string {
  return prefix + randomBytes(12).toString('base64url');
}

type Done = Extract<GenerationEvent, { type: 'done' }>;

/**
 * A native tool call as a `tool_use` block. The id is always a fresh `toolu_…` one: the engine's
 * ids are its own, and clients echo this id back in the `tool_result`.
 */
export function toolUseBlock(call: ToolCall, makeId: () => string = () => newId('toolu_')): ToolUseBlock {
  return { type: 'tool_use', id: makeId(), name: call.function.name, input: call.function.arguments ?? {} };
}

/** The stop reason and sequence of a finished generation. */
export function stopOf(done: Done | undefined, sawToolUse: boolean): { stop_reason: StopReason; stop_sequence: string | null } {
  if (sawToolUse) return { stop_reason: 'tool_use', stop_sequence: null };
  if (done?.reason === 'length') return { stop_reason: 'max_tokens', stop_sequence: null };
  if (done?.stopSequence !== undefined) return { stop_reason: 'stop_sequence', stop_sequence: done.stopSequence };
  return { stop_reason: 'end_turn', stop_sequence: null };
}

/** The usage of a finished generation (zeros when it never finished). */
export function usageOf(done: Done | undefined): Usage {
  const prompt = done?.promptTokens ?? 0;
  const output = done?.completionTokens ?? 0;
  if (done?.cachedTokens === undefined) return { input_tokens: prompt, output_tokens: output };
  const cached = Math.min(done.cachedTokens, prompt);
  return { input_tokens: prompt - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: output };
}

/** Collects a whole generation into one `message`. */
export class MessageCollector {
  readonly #meta: ResponseMeta;
  readonly #makeId: () => string;
  #text = '';
  #thinking = '';
  #calls: ToolUseBlock[] = [];
  #done: Done | undefined;

  constructor(meta: ResponseMeta, makeId: () => string = () => newId('toolu_')) {
    this.#meta = meta;
    this.#makeId = makeId;
  }

  add(event: GenerationEvent): void {
    if (event.type === 'token') this.#text += event.text;
    else if (event.type === 'thinking') this.#thinking += event.text;
    else if (event.type === 'tool_calls') this.#calls.push(...event.calls.map((c) => toolUseBlock(c, this.#makeId)));
    else this.#done = event;
  }

  result(): Message {
    const content: ContentBlock[] = this.#thinking.length > 0 ? [{ type: 'thinking', thinking: this.#thinking, signature: '' }] : [];
    if (this.#text.length > 0 || this.#calls.length === 0) content.push({ type: 'text', text: this.#text });
    content.push(...this.#calls);
    return {
      id: this.#meta.id,
      type: 'message',
      role: 'assistant',
      model: this.#meta.model,
      content,
      ...stopOf(this.#done, this.#calls.length > 0),
      usage: usageOf(this.#done),
    };
  }
}

/** Turns events into stream events, one call per native event. */
export class StreamTranslator {
  readonly #meta: ResponseMeta;
  readonly #makeId: () => string;
  /** Index of the next content block. */
  #index = 0;
  /** The kind of block open at `#index`, if any. */
  #open: 'text' | 'thinking' | null = null;
  #sawToolUse = false;
  #sawText = false;
  #done: Done | undefined;

  constructor(meta: ResponseMeta, makeId: () => string = () => newId('toolu_')) {
    this.#meta = meta;
    this.#makeId = makeId;
  }

  /** `message_start` and `ping`. */
  start(): StreamEvent[] {
    const message: Message = {
      id: this.#meta.id,
      type: 'message',
      role: 'assistant',
      model: this.#meta.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return [{ type: 'message_start', message }, { type: 'ping' }];
  }

  /** Closes the open block (a thinking block gets its empty signature first). */
  #closeText(): StreamEvent[] {
    if (!this.#open) return [];
    const out: StreamEvent[] = [];
    if (this.#open === 'thinking') out.push({ type: 'content_block_delta', index: this.#index, delta: { type: 'signature_delta', signature: '' } });
    this.#open = null;
    out.push({ type: 'content_block_stop', index: this.#index++ });
    return out;
  }

  /** Opens a block of `kind` unless one is open already (closing another kind first). */
  #openBlock(kind: 'text' | 'thinking'): StreamEvent[] {
    if (this.#open === kind) return [];
    const out = this.#closeText();
    this.#open = kind;
    const content_block: ContentBlock = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' };
    out.push({ type: 'content_block_start', index: this.#index, content_block });
    return out;
  }

  /** The stream events for one native event (none for `done` or empty text). */
  next(event: GenerationEvent): StreamEvent[] {
    if (event.type === 'token') {
      if (event.text.length === 0) return [];
      const out = this.#openBlock('text');
      this.#sawText = true;
      out.push({ type: 'content_block_delta', index: this.#index, delta: { type: 'text_delta', text: event.text } });
      return out;
    }
    if (event.type === 'thinking') {
      if (event.text.length === 0) return [];
      const out = this.#openBlock('thinking');
      out.push({ type: 'content_block_delta', index: this.#index, delta: { type: 'thinking_delta', thinking: event.text } });
      return out;
    }
    if (event.type === 'tool_calls') {
      const out = this.#closeText();
      for (const call of event.calls) {
        const block = toolUseBlock(call, this.#makeId);
        const index = this.#index++;
        this.#sawToolUse = true;
        out.push(
          { type: 'content_block_start', index, content_block: { ...block, input: {} } },
          { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(block.input) } },
          { type: 'content_block_stop', index },
        );
      }
      return out;
    }
    this.#done = event;
    return [];
  }

  /** Closes an open block (after an empty text block when the turn wrote and called nothing), then `message_delta` and `message_stop`. */
  finish(): StreamEvent[] {
    const last = this.#sawText || this.#sawToolUse ? [] : [...this.#openBlock('text')];
    return [
      ...last,
      ...this.#closeText(),
      { type: 'message_delta', delta: stopOf(this.#done, this.#sawToolUse), usage: usageOf(this.#done) },
      { type: 'message_stop' },
    ];
  }
}
