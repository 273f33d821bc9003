/**
 * `POST /v1/chat/completions` body → {@link InferenceChatRequest}, plus the few things only the
 * OpenAI side needs (streaming flags, the requested model name).
 *
 * Mapping (OpenAI → native option): `max_completion_tokens` (or the deprecated `max_tokens`) →
 * `num_predict`; `temperature`, `top_p`, `seed`, `presence_penalty`, `frequency_penalty` as they
 * are; `stop` → `stop[]`; `response_format` `json_object` → `format: 'json'`, `json_schema` →
 * `format: <schema>` (enforced by a grammar in the engine); the extension `num_ctx` → `num_ctx`;
 * `reasoning_effort` → `think` (`'auto'`: a thinking model's reasoning is split off into
 * `reasoning_content`; `none` → `false`); `tools` → `tools`; `tool_choice`
 * `none` drops the tools, `required` → `toolChoice: 'required'`, a named function keeps only that
 * tool and → `toolChoice: {name}` (both forced by a JSON-schema grammar in the engine). Unset
 * sampling fields are left to the model's defaults (its Modelfile parameters), as Ollama does.
 *
 * @module
 */
import type { InferenceChatRequest, OutputFormat, SamplingOptions, ToolChoice, ToolDefinition } from 'lia/plugin/contracts';
import { checkSchemaBounds } from 'lia/utils';
import { invalid, singleChoice, stopSequences } from './shared.js';
import { toChatMessages } from './messages.js';
import { ChatCompletionBody, type CompletionBody } from './schemas.js';

/** A translated chat request. */
export interface ChatTranslation {
  native: InferenceChatRequest;
  stream: boolean;
  /** `stream_options.include_usage`: send a trailing usage chunk. */
  includeUsage: boolean;
  /** What was accepted without effect (fields unknown to the spec, tools left out), for the debug log. */
  ignored: string[];
}

/** The top-level fields of `body` that the route schema does not name (a spec newer than this server's). */
function unknownFields(body: ChatCompletionBody): string[] {
  return Object.keys(body).filter((k) => !Object.hasOwn(ChatCompletionBody.properties, k));
}

/** The fields chat and legacy completions share. */
type CommonBody = ChatCompletionBody | CompletionBody;

/** Sampling options shared by chat and legacy completions (unset ones are left to the model). */
export function samplingOptions(body: CommonBody, maxTokens: number | undefined): SamplingOptions {
  const options: SamplingOptions = {};
  const set = <K extends keyof SamplingOptions>(key: K, value: SamplingOptions[K] | null | undefined): void => {
    if (value !== undefined && value !== null) options[key] = value;
  };
  set('num_predict', maxTokens);
  set('temperature', body.temperature);
  set('top_p', body.top_p);
  set('seed', body.seed);
  set('presence_penalty', body.presence_penalty);
  set('frequency_penalty', body.frequency_penalty);
  set('stop', stopSequences(body.stop));
  set('num_ctx', body.num_ctx);
  return options;
}

/** `stream` (default false) and `stream_options.include_usage`, which only counts when streaming. */
export function streamFlags(body: CommonBody): { stream: boolean; includeUsage: boolean } {
  const stream = body.stream ?? false;
  return { stream, includeUsage: stream && (body.stream_options?.include_usage ?? false) };
}

/** `response_format` → native `format`; a schema is bounded (`checkSchemaBounds`). */
export function outputFormat(rf: ChatCompletionBody['response_format']): OutputFormat | undefined {
  if (!rf || rf.type === 'text') return undefined;
  if (rf.type === 'json_object') return 'json';
  if (!rf.json_schema) invalid('response_format.json_schema', "'response_format.json_schema' is required with type json_schema");
  if (!rf.json_schema.schema) return 'json';
  checkSchemaBounds(rf.json_schema.schema, 'response_format.json_schema.schema');
  return rf.json_schema.schema;
}

/**
 * `tools` → definitions; a function tool needs its `function`. Other types (`custom`, types newer
 * than this server) are left out of the prompt and their paths added to `ignored`.
 */
function toolDefinitions(tools: ChatCompletionBody['tools'], ignored: string[]): ToolDefinition[] | undefined {
  if (!tools) return undefined;
  return tools.flatMap((tool, i) => {
    if (tool.type !== 'function') {
      ignored.push(`tools[${i}] (type '${tool.type}')`);
      return [];
    }
    const fn = tool.function;
    if (!fn) return invalid(`tools[${i}].function`, `'tools[${i}].function' is required`);
    const def: ToolDefinition = { type: 'function', function: { name: fn.name } };
    if (typeof fn.description === 'string') def.function.description = fn.description;
    if (fn.parameters) {
      checkSchemaBounds(fn.parameters, `tools[${i}].function.parameters`);
      def.function.parameters = fn.parameters;
    }
    return [def];
  });
}

/**
 * `tool_choice` → the shared request form: a mode, a named function, or `allowed_tools` (the tools
 * narrowed to the listed functions, its `mode` the choice). Forcing another type is a 400.
 */
function chatToolChoice(
  choice: ChatCompletionBody['tool_choice'],
  tools: ToolDefinition[] | undefined,
): { request: ToolChoiceRequest; tools: ToolDefinition[] | undefined } {
  if (choice === null || typeof choice !== 'object') return { request: choice, tools };
  if (choice.type === 'function') {
    if (!choice.function) return invalid('tool_choice.function', "'tool_choice.function' is required");
    return { request: { name: choice.function.name }, tools };
  }
  if (choice.type === 'allowed_tools' && choice.allowed_tools) {
    const listed = choice.allowed_tools.tools as { type?: unknown; function?: { name?: unknown } }[];
    const names = new Set(listed.flatMap((t) => (t.type === 'function' ? [t.function?.name] : [])));
    return { request: choice.allowed_tools.mode === 'required' ? 'required' : 'auto', tools: tools?.filter((d) => names.has(d.function.name)) };
  }
  return invalid('tool_choice.type', `'tool_choice' of type '${choice.type}' is not supported: use none, auto, required, a function or allowed_tools`);
}

/** `tool_choice` once its surface's shape is read: a mode, or the name of the one function to call. */
export type ToolChoiceRequest = 'none' | 'auto' | 'required' | { name: string } | null | undefined;

/**
 * Applies `tool_choice`: `none` → no tools; `auto` or unset → the tools as given; `required` →
 * the tools and `toolChoice: 'required'`; a named function → that tool only and `toolChoice:
 * {name}`. A forced choice without tools is a 400, as OpenAI answers; `nameParam` is the path of
 * the name in the surface's body.
 */
export function chooseTools(
  choice: ToolChoiceRequest,
  tools: ToolDefinition[] | undefined,
  nameParam: string,
): { tools?: ToolDefinition[]; toolChoice?: ToolChoice } {
  const some = tools !== undefined && tools.length > 0;
  if (choice === undefined || choice === null || choice === 'auto') return some ? { tools } : {};
  if (choice === 'none') return {};
  if (!some) return invalid('tool_choice', "'tool_choice' is only allowed when 'tools' are specified");
  if (choice === 'required') return { tools, toolChoice: 'required' };
  const name = choice.name;
  const picked = tools.filter((t) => t.function.name === name);
  if (picked.length === 0) invalid(nameParam, `tool '${name}' is not in 'tools'`);
  return { tools: picked, toolChoice: { name } };
}

/** Translates a chat completion body (checked by its route schema); throws a 400 with `param` for what the schema cannot rule. */
export function translateChatRequest(body: ChatCompletionBody): ChatTranslation {
  const messages = toChatMessages(body.messages);
  singleChoice(body.n);
  if (body.top_logprobs != null && !body.logprobs) invalid('top_logprobs', "'top_logprobs' requires 'logprobs' to be true");
  const maxTokens = body.max_completion_tokens ?? body.max_tokens ?? undefined;
  const native: InferenceChatRequest = {
    model: body.model,
    messages,
    options: samplingOptions(body, maxTokens),
    // A thinking model's reasoning goes apart (reasoning_content) unless the client says `none`.
    think: body.reasoning_effort === 'none' ? false : 'auto',
  };
  if (body.logprobs) native.logprobs = body.top_logprobs ?? 0;
  const format = outputFormat(body.response_format);
  if (format !== undefined) native.format = format;
  const ignored = unknownFields(body);
  const choice = chatToolChoice(body.tool_choice, toolDefinitions(body.tools, ignored));
  const { tools, toolChoice } = chooseTools(choice.request, choice.tools, 'tool_choice.function.name');
  if (tools) native.tools = tools;
  if (toolChoice) native.toolChoice = toolChoice;
  return { native, ...streamFlags(body), ignored };
}
