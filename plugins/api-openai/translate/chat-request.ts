/**
 * `POST /v1/chat/completions` body → {@link InferenceChatRequest}, plus the few things only the
 * OpenAI side needs (streaming flags, the requested model name).
 *
 * Mapping (OpenAI → native option): `max_completion_tokens` (or the deprecated `max_tokens`) →
 * `num_predict`; `temperature`, `top_p`, `seed`, `presence_penalty`, `frequency_penalty` as they
 * are; `stop` → `stop[]`; `response_format` `json_object` → `format: 'json'`, `json_schema` →
 * `format: <schema>` (enforced by a grammar in the engine); `tools` → `tools`; `tool_choice`
 * `none` drops the tools, `required` → `toolChoice: 'required'`, a named function keeps only that
 * tool and → `toolChoice: {name}` (both forced by a JSON-schema grammar in the engine). Unset
 * sampling fields are left to the model's defaults (its Modelfile parameters), as Ollama does.
 *
 * @module
 */
import type { InferenceChatRequest, OutputFormat, SamplingOptions, ToolChoice, ToolDefinition } from '../../../core/index.js';
import {
  asBody,
  invalid,
  optionalBool,
  optionalInt,
  optionalNumber,
  optionalObject,
  requiredString,
  singleChoice,
  stopSequences,
  type Body,
} from './fields.js';
import { toChatMessages } from './messages.js';

/** A translated chat request. */
export interface ChatTranslation {
  native: InferenceChatRequest;
  stream: boolean;
  /** `stream_options.include_usage`: send a trailing usage chunk. */
  includeUsage: boolean;
}

/** Sampling options shared by chat and legacy completions. */
export function samplingOptions(body: Body, maxTokens: number | undefined): SamplingOptions {
  const options: SamplingOptions = {};
  const set = <K extends keyof SamplingOptions>(key: K, value: SamplingOptions[K] | undefined): void => {
    if (value !== undefined) options[key] = value;
  };
  set('num_predict', maxTokens);
  set('temperature', optionalNumber(body, 'temperature', 0, 2));
  set('top_p', optionalNumber(body, 'top_p', 0, 1));
  set('seed', optionalInt(body, 'seed', Number.MIN_SAFE_INTEGER));
  set('presence_penalty', optionalNumber(body, 'presence_penalty', -2, 2));
  set('frequency_penalty', optionalNumber(body, 'frequency_penalty', -2, 2));
  set('stop', stopSequences(body));
  return options;
}

/** `stream` and `stream_options.include_usage`. */
export function streamFlags(body: Body): { stream: boolean; includeUsage: boolean } {
  const stream = optionalBool(body, 'stream') ?? false;
  const opts = optionalObject(body, 'stream_options');
  const includeUsage = opts ? optionalBool(opts, 'include_usage', 'stream_options.include_usage') ?? false : false;
  return { stream, includeUsage: stream && includeUsage };
}

/** `response_format` → native `format`. */
export function outputFormat(body: Body): OutputFormat | undefined {
  const rf = optionalObject(body, 'response_format');
  if (!rf) return undefined;
  switch (rf.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return 'json';
    case 'json_schema': {
      const js = optionalObject(rf, 'json_schema', 'response_format.json_schema');
      if (!js) invalid('response_format.json_schema', "'response_format.json_schema' is required with type json_schema");
      const schema = optionalObject(js, 'schema', 'response_format.json_schema.schema');
      return schema ?? 'json';
    }
    default:
      return invalid('response_format.type', `'response_format.type' must be text, json_object or json_schema; got ${JSON.stringify(rf.type)}`);
  }
}

function toolDefinitions(body: Body): ToolDefinition[] | undefined {
  const v = body.tools;
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) invalid('tools', "'tools' must be an array");
  return v.map((tool, i) => {
    const p = `tools[${i}]`;
    if (tool === null || typeof tool !== 'object') invalid(p, `'${p}' must be an object`);
    const t = tool as Body;
    if (t.type !== 'function') invalid(`${p}.type`, `only tools of type 'function' are supported; got ${JSON.stringify(t.type)}`);
    const fn = optionalObject(t, 'function', `${p}.function`);
    if (!fn) invalid(`${p}.function`, `'${p}.function' is required`);
    const name = requiredString(fn, 'name', `${p}.function.name`);
    const def: ToolDefinition = { type: 'function', function: { name } };
    if (typeof fn.description === 'string') def.function.description = fn.description;
    const parameters = optionalObject(fn, 'parameters', `${p}.function.parameters`);
    if (parameters) def.function.parameters = parameters;
    return def;
  });
}

const TOOL_CHOICE_SHAPE = "'tool_choice' must be none, auto, required or {type: 'function', function: {name}}";

/**
 * Applies `tool_choice`: `none` → no tools; `auto` or unset → the tools as given; `required` →
 * the tools and `toolChoice: 'required'`; a named function → that tool only and `toolChoice:
 * {name}`. A forced choice without tools is a 400, as OpenAI answers.
 */
function chooseTools(
  body: Body,
  tools: ToolDefinition[] | undefined,
): { tools?: ToolDefinition[]; toolChoice?: ToolChoice } {
  const choice = body.tool_choice;
  const some = tools !== undefined && tools.length > 0;
  if (choice === undefined || choice === null || choice === 'auto') return some ? { tools } : {};
  if (choice === 'none') return {};
  const forced = choice === 'required' || (typeof choice === 'object' && !Array.isArray(choice));
  if (!forced) return invalid('tool_choice', TOOL_CHOICE_SHAPE);
  if (!some) return invalid('tool_choice', "'tool_choice' is only allowed when 'tools' are specified");
  if (choice === 'required') return { tools, toolChoice: 'required' };
  const fn = optionalObject(choice as Body, 'function', 'tool_choice.function');
  const name = fn ? requiredString(fn, 'name', 'tool_choice.function.name') : undefined;
  if ((choice as Body).type !== 'function' || !name) invalid('tool_choice', TOOL_CHOICE_SHAPE);
  const picked = tools.filter((t) => t.function.name === name);
  if (picked.length === 0) invalid('tool_choice.function.name', `tool '${name}' is not in 'tools'`);
  return { tools: picked, toolChoice: { name } };
}

/** Translates a chat completion request body; throws a 400 with `param` on bad input. */
export function translateChatRequest(raw: unknown): ChatTranslation {
  const body = asBody(raw);
  const model = requiredString(body, 'model');
  const messages = toChatMessages(body.messages);
  singleChoice(body);
  if (optionalBool(body, 'logprobs')) invalid('logprobs', "'logprobs' is not supported by this server");
  const maxTokens =
    optionalInt(body, 'max_completion_tokens', 1) ?? optionalInt(body, 'max_tokens', 1);
  const native: InferenceChatRequest = { model, messages, options: samplingOptions(body, maxTokens) };
  const format = outputFormat(body);
  if (format !== undefined) native.format = format;
  const { tools, toolChoice } = chooseTools(body, toolDefinitions(body));
  if (tools) native.tools = tools;
  if (toolChoice) native.toolChoice = toolChoice;
  return { native, ...streamFlags(body) };
}
