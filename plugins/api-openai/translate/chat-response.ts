/**
 * Native {@link GenerationEvent}s → `chat.completion` (collected) or `chat.completion.chunk`s
 * (streamed), shaped as OpenAI emits them and as strict clients check them:
 *
 * - the first chunk is `delta: {role: 'assistant', content: ''}`; content chunks carry only
 *   `content`; every chunk has `finish_reason: null` and `logprobs: null` until one final chunk
 *   with `delta: {}` and the reason;
 * - a tool call is one delta carrying `index`, `id` (`call_…`), `type`, `function.name` and the
 *   whole `arguments` as a JSON string; `finish_reason` is `tool_calls` whenever one was emitted;
 * - a thinking model's reasoning (split off by the engine) goes in `reasoning_content`, as
 *   llama-server sends it, apart from `content`;
 * - usage goes only in a trailing `choices: []` chunk, and only when the client asked for it;
 * - with `logprobs` asked for, `logprobs` is `{content, refusal: null}`: every answer token's entry
 *   (collected), or the entries of the tokens a content chunk carries (streamed; other chunks
 *   keep `null`). Reasoning tokens have none, as OpenAI reports none for them.
 *
 * The classes are pure (no I/O): the route feeds them events and writes what they return.
 *
 * @module
 */
import type { GeneratedLogprob, GenerationEvent, ToolCall } from 'lia/engine';
import { newId, envelope, type ResponseMeta } from './shared.js';

/** OpenAI's `finish_reason` for chat. */
export type ChatFinishReason = 'stop' | 'length' | 'tool_calls';

/** `usage` of a response. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens`: prompt tokens found in the model's cache, not evaluated again (where the backend reports it). */
  prompt_tokens_details?: { cached_tokens: number };
  /**
   * Speculative decoding's drafted tokens the model accepted and rejected (OpenAI's fields for its
   * Predicted Outputs), where the model was loaded with speculation.
   */
  completion_tokens_details?: { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

/** One tool call as OpenAI sends it. */
export interface OpenAIToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A `chat.completion` object. */
export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  system_fingerprint: string;
  choices: {
    index: number;
    /** `reasoning_content` (llama-server's and DeepSeek's name): a thinking model's reasoning, when it has some. */
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; refusal: null; tool_calls?: OpenAIToolCall[] };
    logprobs: ChatLogprobs | null;
    finish_reason: ChatFinishReason;
  }[];
  usage: Usage;
}

/** `choices[].logprobs` of chat: one entry per token, with its most likely alternatives. */
export interface ChatLogprobs {
  content: GeneratedLogprob[];
  refusal: null;
}

/** The `delta` of a chunk. */
export interface ChatDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: (OpenAIToolCall & { index: number })[];
}

/** A `chat.completion.chunk` object. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  system_fingerprint: string;
  choices: { index: number; delta: ChatDelta; logprobs: ChatLogprobs | null; finish_reason: ChatFinishReason | null }[];
  usage?: Usage;
}

/** Usage from a `done` event. */
export function usageOf(done: Extract<GenerationEvent, { type: 'done' }>): Usage {
  return {
    prompt_tokens: done.promptTokens,
    completion_tokens: done.completionTokens,
    total_tokens: done.promptTokens + done.completionTokens,
    ...(done.cachedTokens !== undefined ? { prompt_tokens_details: { cached_tokens: done.cachedTokens } } : {}),
    ...(done.draft
      ? { completion_tokens_details: { accepted_prediction_tokens: done.draft.accepted, rejected_prediction_tokens: done.draft.tokens - done.draft.accepted } }
      : {}),
  };
}

/** A native tool call as OpenAI sends it: an id and `arguments` as a JSON string. */
export function toOpenAIToolCall(call: ToolCall, makeId: () => string = () => newId('call_')): OpenAIToolCall {
  return {
    id: call.id && call.id.length > 0 ? call.id : makeId(),
    type: 'function',
    function: { name: call.function.name, arguments: JSON.stringify(call.function.arguments ?? {}) },
  };
}

type Done = Extract<GenerationEvent, { type: 'done' }>;

const ZERO_USAGE: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

function finishReason(done: Done | undefined, sawToolCall: boolean): ChatFinishReason {
  if (sawToolCall) return 'tool_calls';
  return done?.reason ?? 'stop';
}

/** Collects a whole generation into one `chat.completion`. */
export class ChatCollector {
  readonly #meta: ResponseMeta;
  readonly #makeId: () => string;
  #text = '';
  #reasoning = '';
  #calls: OpenAIToolCall[] = [];
  #done: Done | undefined;
  readonly #logprobs: GeneratedLogprob[] | null;

  /** `logprobs`: the request asked for them. Defaults to false. */
  constructor(meta: ResponseMeta, makeId: () => string = () => newId('call_'), logprobs = false) {
    this.#meta = meta;
    this.#makeId = makeId;
    this.#logprobs = logprobs ? [] : null;
  }

  add(event: GenerationEvent): void {
    if (event.type === 'token') {
      this.#text += event.text;
      if (event.logprobs) this.#logprobs?.push(...event.logprobs);
    } else if (event.type === 'thinking') this.#reasoning += event.text;
    else if (event.type === 'tool_calls') this.#calls.push(...event.calls.map((c) => toOpenAIToolCall(c, this.#makeId)));
    else this.#done = event;
  }

  result(): ChatCompletion {
    const hasCalls = this.#calls.length > 0;
    const message: ChatCompletion['choices'][number]['message'] = {
      role: 'assistant',
      content: hasCalls && this.#text.length === 0 ? null : this.#text,
      ...(this.#reasoning ? { reasoning_content: this.#reasoning } : {}),
      refusal: null,
    };
    if (hasCalls) message.tool_calls = this.#calls;
    return {
      ...envelope(this.#meta, 'chat.completion'),
      choices: [
        {
          index: 0,
          message,
          logprobs: this.#logprobs ? { content: this.#logprobs, refusal: null } : null,
          finish_reason: finishReason(this.#done, hasCalls),
        },
      ],
      usage: this.#done ? usageOf(this.#done) : ZERO_USAGE,
    };
  }
}

/** Turns events into stream chunks, one call per event. */
export class ChatChunker {
  readonly #meta: ResponseMeta;
  readonly #makeId: () => string;
  #toolIndex = 0;
  #done: Done | undefined;
  readonly #logprobs: boolean;

  /** `logprobs`: the request asked for them. Defaults to false. */
  constructor(meta: ResponseMeta, makeId: () => string = () => newId('call_'), logprobs = false) {
    this.#meta = meta;
    this.#makeId = makeId;
    this.#logprobs = logprobs;
  }

  #chunk(delta: ChatDelta, finish: ChatFinishReason | null = null, logprobs: GeneratedLogprob[] | null = null): ChatCompletionChunk {
    return {
      ...envelope(this.#meta, 'chat.completion.chunk'),
      choices: [{ index: 0, delta, logprobs: logprobs ? { content: logprobs, refusal: null } : null, finish_reason: finish }],
    };
  }

  /** The opening chunk: `delta: {role: 'assistant', content: ''}`. */
  first(): ChatCompletionChunk {
    return this.#chunk({ role: 'assistant', content: '' });
  }

  /** The chunk for one event, or null when the event has nothing to send (`done`, empty text). */
  next(event: GenerationEvent): ChatCompletionChunk | null {
    if (event.type === 'token') {
      return event.text.length > 0 ? this.#chunk({ content: event.text }, null, this.#logprobs ? (event.logprobs ?? []) : null) : null;
    }
    if (event.type === 'thinking') return event.text.length > 0 ? this.#chunk({ reasoning_content: event.text }) : null;
    if (event.type === 'tool_calls') {
      if (event.calls.length === 0) return null;
      const tool_calls = event.calls.map((c) => ({ index: this.#toolIndex++, ...toOpenAIToolCall(c, this.#makeId) }));
      return this.#chunk({ tool_calls });
    }
    this.#done = event;
    return null;
  }

  /** The final chunk: empty delta and the finish reason. */
  last(): ChatCompletionChunk {
    return this.#chunk({}, finishReason(this.#done, this.#toolIndex > 0));
  }

  /** The trailing usage chunk (`choices: []`), for `stream_options.include_usage`. */
  usage(): ChatCompletionChunk {
    return {
      ...envelope(this.#meta, 'chat.completion.chunk'),
      choices: [],
      usage: this.#done ? usageOf(this.#done) : ZERO_USAGE,
    };
  }
}
