/**
 * The Responses API's `response` object and its output items, as OpenAI's schema requires them:
 * every required field is present (`error`, `incomplete_details`, `instructions`, `tools`,
 * `tool_choice`, `temperature`, `top_p`, `parallel_tool_calls`, `metadata`, …), and what the
 * request set is echoed back. Sampling fields the request left unset are `null`: the model's own
 * defaults applied, which this server does not know as numbers.
 *
 * @module
 */
import type { GenerationEvent } from 'lia/plugin/contracts';
import type { ResponseMeta } from './shared.js';

/** A function tool as the response echoes it (flat, every field present). */
export interface FunctionToolEcho {
  type: 'function';
  name: string;
  description: string | null;
  parameters: Record<string, unknown> | null;
  strict: boolean | null;
}

/** `text.format` as the response echoes it. */
export type TextFormatEcho =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict: boolean | null; description?: string };

/** `tool_choice` as the response echoes it. */
export type ToolChoiceEcho = 'none' | 'auto' | 'required' | { type: 'function'; name: string } | Record<string, unknown>;

/** The request fields a response echoes (defaults applied). */
export interface ResponseEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  temperature: number | null;
  top_p: number | null;
  /** Function tools normalised; other tools (namespaces, hosted tools left out) as the client sent them. */
  tools: (FunctionToolEcho | Record<string, unknown>)[];
  tool_choice: ToolChoiceEcho;
  text: { format: TextFormatEcho; verbosity: 'low' | 'medium' | 'high' };
  parallel_tool_calls: boolean;
  metadata: Record<string, string>;
  user?: string;
}

/** An `output_text` content part (no annotations or log probabilities: the engine makes none). */
export interface OutputText {
  type: 'output_text';
  text: string;
  annotations: never[];
  logprobs: never[];
}

/** Status of an output item. */
export type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

/** An assistant message of `output`. */
export interface MessageItem {
  type: 'message';
  id: string;
  status: ItemStatus;
  role: 'assistant';
  content: OutputText[];
}

/** A function call of `output`: `call_id` is what the `function_call_output` answering it names. */
export interface FunctionCallItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  /** The namespace of a function the client declared inside a `namespace` tool. */
  namespace?: string;
  arguments: string;
  status: ItemStatus;
}

/** A thinking model's reasoning (the text the engine split off), as open-weight models report it. */
export interface ReasoningItem {
  type: 'reasoning';
  id: string;
  status: ItemStatus;
  summary: never[];
  content: { type: 'reasoning_text'; text: string }[];
}

export type OutputItem = MessageItem | FunctionCallItem | ReasoningItem;

/** `usage` of a response (no cached or reasoning tokens here: both are 0). */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete';

/** The `response` object. */
export interface ResponseObject extends Omit<ResponseEcho, 'user'> {
  id: string;
  object: 'response';
  created_at: number;
  status: ResponseStatus;
  completed_at: number | null;
  error: null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  model: string;
  output: OutputItem[];
  previous_response_id: null;
  reasoning: null;
  store: false;
  background: false;
  truncation: 'disabled';
  usage?: ResponseUsage;
  user?: string;
}

/** Usage from a `done` event. */
export function responseUsage(done: Extract<GenerationEvent, { type: 'done' }> | undefined): ResponseUsage {
  const input = done?.promptTokens ?? 0;
  const output = done?.completionTokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  };
}

/** What changes between the snapshots of one response. */
export interface ResponseState {
  status: ResponseStatus;
  output: OutputItem[];
  /** Set once the generation is over. */
  usage?: ResponseUsage;
  /** Unix seconds; set once the generation is over. */
  completedAt?: number;
}

/** The `response` object for a state; `output` is copied, so later changes do not reach it. */
export function responseObject(meta: ResponseMeta, echo: ResponseEcho, state: ResponseState): ResponseObject {
  const { user, ...echoed } = echo;
  const out: ResponseObject = {
    id: meta.id,
    object: 'response',
    created_at: meta.created,
    status: state.status,
    completed_at: state.status === 'completed' ? (state.completedAt ?? null) : null,
    error: null,
    incomplete_details: state.status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    model: meta.model,
    output: structuredClone(state.output),
    previous_response_id: null,
    reasoning: null,
    store: false,
    background: false,
    truncation: 'disabled',
    ...echoed,
  };
  if (state.usage) out.usage = state.usage;
  if (user !== undefined) out.user = user;
  return out;
}
