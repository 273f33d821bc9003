/**
 * Native {@link GenerationEvent}s → the Responses API's stream events and final `response`
 * object. One {@link ResponseEmitter} serves both: a stream writes the events it returns, a plain
 * request drops them and sends {@link ResponseEmitter.response}, so the two always agree.
 *
 * The sequence, numbered from 0 by `sequence_number`:
 *
 * 1. `response.created` and `response.in_progress` (status `in_progress`, empty `output`);
 * 2. for text: `response.output_item.added` (a `message`), `response.content_part.added` (an empty
 *    `output_text`), one `response.output_text.delta` per token, then `response.output_text.done`,
 *    `response.content_part.done` and `response.output_item.done` with the whole text;
 * 3. for each tool call: `response.output_item.added` (a `function_call` with empty `arguments`),
 *    one `response.function_call_arguments.delta` with the whole JSON (the engine parses a call
 *    before it reports it), `response.function_call_arguments.done`, `response.output_item.done`;
 * 4. `response.completed`, or `response.incomplete` (`incomplete_details.reason:
 *    "max_output_tokens"`) when the generation was cut by the token limit or the context.
 *
 * A thinking model's reasoning (split off by the engine) comes first, as a `reasoning` item with
 * one `reasoning_text` part: `response.output_item.added`, `response.reasoning_text.delta` per
 * chunk, `response.reasoning_text.done`, `response.output_item.done`.
 *
 * A generation with neither text nor calls still answers one (empty) message, so clients that
 * read the message find one. The class is pure (no I/O).
 *
 * @module
 */
import type { AppError } from 'lia/plugin';
import type { GenerationEvent } from 'lia/plugin/contracts';
import { toOpenAIToolCall } from './chat-response.js';
import { openaiErrorBody } from '../errors.js';
import { newId, unixSeconds, type ResponseMeta } from './shared.js';
import {
  responseObject,
  responseUsage,
  type FunctionCallItem,
  type MessageItem,
  type OutputText,
  type ReasoningItem,
  type ResponseEcho,
  type ResponseObject,
  type ResponseState,
} from './responses-object.js';
import type { QualifiedName } from './responses-tools.js';

type Done = Extract<GenerationEvent, { type: 'done' }>;

/** One stream event (its `type` is also the SSE `event:` name). */
export type ResponseStreamEvent = { type: string; sequence_number: number } & Record<string, unknown>;

/** Makers of the ids of one response's items. */
export interface ItemIds {
  message(): string;
  functionCall(): string;
  call(): string;
  /** Defaults to `rs_…` ids. */
  reasoning?(): string;
}

const defaultIds: ItemIds = { message: () => newId('msg_'), functionCall: () => newId('fc_'), call: () => newId('call_') };

const emptyText = (): OutputText => ({ type: 'output_text', text: '', annotations: [], logprobs: [] });

export class ResponseEmitter {
  readonly #meta: ResponseMeta;
  readonly #echo: ResponseEcho;
  readonly #ids: ItemIds;
  readonly #names: ReadonlyMap<string, QualifiedName>;
  readonly #state: ResponseState = { status: 'in_progress', output: [] };
  #seq = 0;
  /** The message being written, and its index in `output`. */
  #message: { item: MessageItem; index: number } | undefined;
  /** The reasoning being written, and its index in `output`. */
  #reasoning: { item: ReasoningItem; index: number } | undefined;
  #done: Done | undefined;

  /** `names`: flattened tool names → the namespaced function the client declared (responses-tools.ts). */
  constructor(meta: ResponseMeta, echo: ResponseEcho, ids: ItemIds = defaultIds, names: ReadonlyMap<string, QualifiedName> = new Map()) {
    this.#meta = meta;
    this.#echo = echo;
    this.#ids = ids;
    this.#names = names;
  }

  #event(type: string, fields: Record<string, unknown>): ResponseStreamEvent {
    return { type, ...structuredClone(fields), sequence_number: this.#seq++ };
  }

  /** The response as it stands. */
  response(): ResponseObject {
    return responseObject(this.#meta, this.#echo, this.#state);
  }

  /** `response.created` and `response.in_progress`. */
  start(): ResponseStreamEvent[] {
    const response = this.response();
    return [this.#event('response.created', { response }), this.#event('response.in_progress', { response })];
  }

  /** The events for one native event (none for `done`, whose usage waits for {@link finish}). */
  next(event: GenerationEvent): ResponseStreamEvent[] {
    if (event.type === 'token') return event.text.length > 0 ? [...this.#closeReasoning(), ...this.#text(event.text)] : [];
    if (event.type === 'tool_calls') return [...this.#closeReasoning(), ...this.#closeMessage(), ...event.calls.flatMap((c) => this.#call(c))];
    if (event.type === 'thinking') return event.text.length > 0 ? this.#think(event.text) : [];
    this.#done = event;
    return [];
  }

  /** The closing events: the open message's, then `response.completed` or `response.incomplete`. */
  finish(): ResponseStreamEvent[] {
    const out: ResponseStreamEvent[] = this.#closeReasoning();
    if (this.#state.output.every((i) => i.type === 'reasoning')) out.push(...this.#openMessage());
    out.push(...this.#closeMessage());
    const incomplete = this.#done?.reason === 'length';
    this.#state.status = incomplete ? 'incomplete' : 'completed';
    this.#state.usage = responseUsage(this.#done);
    this.#state.completedAt = unixSeconds();
    out.push(this.#event(incomplete ? 'response.incomplete' : 'response.completed', { response: this.response() }));
    return out;
  }

  /** The `error` event for a failure after the stream started (OpenAI's `code`, `message`, `param`). */
  error(err: AppError): ResponseStreamEvent {
    const { message, code, param } = openaiErrorBody(err).error;
    return this.#event('error', { code, message, param });
  }

  #openMessage(): ResponseStreamEvent[] {
    const item: MessageItem = { type: 'message', id: this.#ids.message(), status: 'in_progress', role: 'assistant', content: [] };
    const index = this.#state.output.push(item) - 1;
    this.#message = { item, index };
    const added = this.#event('response.output_item.added', { output_index: index, item });
    item.content.push(emptyText());
    const where = { item_id: item.id, output_index: index, content_index: 0 };
    return [added, this.#event('response.content_part.added', { ...where, part: item.content[0] })];
  }

  #text(delta: string): ResponseStreamEvent[] {
    const out = this.#message ? [] : this.#openMessage();
    const { item, index } = this.#message!;
    item.content[0]!.text += delta;
    out.push(this.#event('response.output_text.delta', { item_id: item.id, output_index: index, content_index: 0, delta, logprobs: [] }));
    return out;
  }

  #closeMessage(): ResponseStreamEvent[] {
    if (!this.#message) return [];
    const { item, index } = this.#message;
    this.#message = undefined;
    const part = item.content[0]!;
    const where = { item_id: item.id, output_index: index, content_index: 0 };
    item.status = this.#done?.reason === 'length' ? 'incomplete' : 'completed';
    return [
      this.#event('response.output_text.done', { ...where, text: part.text, logprobs: [] }),
      this.#event('response.content_part.done', { ...where, part }),
      this.#event('response.output_item.done', { output_index: index, item }),
    ];
  }

  /** Reasoning text: a `reasoning` item (opened on the first) and a `response.reasoning_text.delta`. */
  #think(delta: string): ResponseStreamEvent[] {
    const out: ResponseStreamEvent[] = [];
    if (!this.#reasoning) {
      const item: ReasoningItem = { type: 'reasoning', id: this.#ids.reasoning?.() ?? newId('rs_'), status: 'in_progress', summary: [], content: [] };
      const index = this.#state.output.push(item) - 1;
      this.#reasoning = { item, index };
      out.push(this.#event('response.output_item.added', { output_index: index, item }));
      item.content.push({ type: 'reasoning_text', text: '' });
    }
    const { item, index } = this.#reasoning;
    item.content[0]!.text += delta;
    out.push(this.#event('response.reasoning_text.delta', { item_id: item.id, output_index: index, content_index: 0, delta }));
    return out;
  }

  #closeReasoning(): ResponseStreamEvent[] {
    if (!this.#reasoning) return [];
    const { item, index } = this.#reasoning;
    this.#reasoning = undefined;
    item.status = 'completed';
    return [
      this.#event('response.reasoning_text.done', { item_id: item.id, output_index: index, content_index: 0, text: item.content[0]!.text }),
      this.#event('response.output_item.done', { output_index: index, item }),
    ];
  }

  #call(call: Parameters<typeof toOpenAIToolCall>[0]): ResponseStreamEvent[] {
    const { id: callId, function: fn } = toOpenAIToolCall(call, () => this.#ids.call());
    // A flattened namespace function goes back under the name and namespace the client declared.
    const qualified = this.#names.get(fn.name);
    const name = qualified?.name ?? fn.name;
    const item: FunctionCallItem = { type: 'function_call', id: this.#ids.functionCall(), call_id: callId, name, arguments: '', status: 'in_progress' };
    if (qualified) item.namespace = qualified.namespace;
    const index = this.#state.output.push(item) - 1;
    const added = this.#event('response.output_item.added', { output_index: index, item });
    item.arguments = fn.arguments;
    item.status = 'completed';
    const where = { item_id: item.id, output_index: index };
    return [
      added,
      this.#event('response.function_call_arguments.delta', { ...where, delta: fn.arguments }),
      this.#event('response.function_call_arguments.done', { ...where, name, arguments: fn.arguments }),
      this.#event('response.output_item.done', { output_index: index, item }),
    ];
  }
}
