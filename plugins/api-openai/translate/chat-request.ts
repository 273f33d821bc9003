/**
 * `POST /v1/chat/completions` body → {@link InferenceChatRequest}, plus the few things only the
 * OpenAI side needs (streaming flags, the requested model name).
 *
 * Mapping (OpenAI → native option): `max_completion_tokens` (or the deprecated `max_tokens`) →
 * `num_predict`; `temperature`, `top_p`, `seed`, `presence_penalty`, `frequency_penalty` as they
 * are; `stop` → `stop[]`; `response_format` `json_object` → `format: 'json'`, `json_schema` →
 * `format: <schema>` (enforced by a grammar in the engine); the extensions `num_ctx` → `num_ctx`
 * and `lora` (llama-server's per-request LoRA scales) → `lora`; `draft_model` (LM Studio's),
 * `draft_num_predict` and `draft_ngram` → the same options (speculative decoding);
 * `reasoning_effort` → `think` (`'auto'`: a thinking model's reasoning is split off into
 * `reasoning_content`; `none` → `false`); `tools` → `tools`; `tool_choice`
 * `none` drops the tools, `required` → `toolChoice: 'required'`, a named function keeps only that
 * tool and → `toolChoice: {name}` (both forced by a JSON-schema grammar in the engine). Unset
 * sampling fields are left to the model's defaults (its Modelfile parameters), as Ollama does.
 *
 * Messages ({@link toChatMessages}) are accepted as OpenAI accepts them and as real clients send
 * them: `developer` is `system`, and the system/developer messages that open the conversation are merged into one (strict chat templates
 * refuse a second or late system message); content is a string, an array of text (or refusal)
 * parts, or — for assistant messages with `tool_calls` — `null` or absent; `tool_calls[].function
 * .arguments` is a JSON string that is parsed here; a `tool` message gets the name of the tool it
 * answers from the assistant call with the same `tool_call_id`; the deprecated `function` role is
 * a `tool` message. `image_url` parts of user messages carry images as `data:` URLs (base64),
 * which the engine checks and gives only to a model with the `vision` capability (an `http(s)` URL
 * is fetched by the engine only where the operator allows it, `engine.remoteImages`; else a 400);
 * `input_audio` parts of user messages carry audio clips (base64 `data`, in any container the
 * engine decodes, whatever `format` says), which only a model with the `audio` capability takes;
 * file parts are a 400; part types newer than this server are left out.
 *
 * @module
 */
import type { ChatMessage, InferenceChatRequest, OutputFormat, SamplingOptions, ToolCall, ToolChoice, ToolDefinition } from 'lia/engine';
import { checkSchemaBounds, imageFromDataUrl } from 'lia/utils';
import { invalid, singleChoice, stopSequences, type Body } from './shared.js';
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
  set(
    'lora',
    body.lora?.map(({ id, scale }) => ({ id, scale })),
  );
  set('draft_model', body.draft_model);
  set('draft_num_predict', body.draft_num_predict);
  set('draft_ngram', body.draft_ngram);
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

// The messages: OpenAI chat messages → native ChatMessages.

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** Flattens `content` (string, parts or null) to text. `null`/absent is allowed only when `optional`. */
function contentText(value: unknown, param: string, optional: boolean): string {
  const { text, images, audio } = content(value, param, optional);
  if (images.length > 0) invalid(param, `'${param}' may carry images only in user messages`);
  if (audio.length > 0) invalid(param, `'${param}' may carry audio only in user messages`);
  return text;
}

/** The image of an `image_url` part: its `data:` URL's base64 payload. */
function partImage(part: Body, p: string): string {
  const ref = part['image_url'];
  const url = typeof ref === 'string' ? ref : ref !== null && typeof ref === 'object' ? (ref as Body)['url'] : undefined;
  if (typeof url !== 'string') invalid(`${p}.image_url.url`, `'${p}.image_url.url' must be a string`);
  return imageFromDataUrl(url, `${p}.image_url.url`);
}

/** The clip of an `input_audio` part: its base64 `data`. */
function partAudio(part: Body, p: string): string {
  const ref = part['input_audio'];
  const data = ref !== null && typeof ref === 'object' ? (ref as Body)['data'] : undefined;
  if (typeof data !== 'string') invalid(`${p}.input_audio.data`, `'${p}.input_audio.data' must be a string (base64 audio)`);
  return data;
}

/** `content` as text (its text parts joined), the images of its `image_url` parts and the clips of its `input_audio` parts. */
function content(value: unknown, param: string, optional: boolean): { text: string; images: string[]; audio: string[] } {
  if (typeof value === 'string') return { text: value, images: [], audio: [] };
  if (value === null || value === undefined) {
    if (optional) return { text: '', images: [], audio: [] };
    invalid(param, `'${param}' is required`);
  }
  if (!Array.isArray(value)) invalid(param, `'${param}' must be a string or an array of content parts`);
  const texts: string[] = [];
  const images: string[] = [];
  const audio: string[] = [];
  value.forEach((part, i) => {
    const p = `${param}[${i}]`;
    if (part === null || typeof part !== 'object') invalid(p, `'${p}' must be a content part object`);
    const { type, text, refusal } = part as Body;
    if (type === 'text') {
      if (typeof text !== 'string') invalid(`${p}.text`, `'${p}.text' must be a string`);
      texts.push(text);
    } else if (type === 'refusal') {
      if (typeof refusal !== 'string') invalid(`${p}.refusal`, `'${p}.refusal' must be a string`);
      texts.push(refusal);
    } else if (type === 'image_url') {
      images.push(partImage(part as Body, p));
    } else if (type === 'input_audio') {
      audio.push(partAudio(part as Body, p));
    } else if (type === 'file') {
      invalid(`${p}.type`, `content parts of type '${type}' are not supported: this endpoint takes text, images and audio`);
    } else if (typeof type !== 'string') {
      invalid(`${p}.type`, `'${p}.type' must be a string`);
    }
    // A part type newer than this server: left out.
  });
  return { text: texts.join('\n'), images, audio };
}

/** Parses `arguments` (a JSON string; an object is tolerated) into an object. */
function toolArguments(value: unknown, param: string): Record<string, unknown> {
  if (value === undefined || value === null || value === '') return {};
  let parsed: unknown = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      invalid(param, `'${param}' must be a JSON-encoded object`);
    }
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    invalid(param, `'${param}' must encode a JSON object`);
  }
  return parsed as Record<string, unknown>;
}

function toolCalls(value: unknown, param: string): ToolCall[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) invalid(param, `'${param}' must be an array`);
  return value.map((call, i) => {
    const p = `${param}[${i}]`;
    if (call === null || typeof call !== 'object') invalid(p, `'${p}' must be an object`);
    const { id, function: fn } = call as Body;
    if (fn === null || typeof fn !== 'object') invalid(`${p}.function`, `'${p}.function' must be an object`);
    const { name, arguments: args } = fn as Body;
    if (typeof name !== 'string' || name === '') invalid(`${p}.function.name`, `'${p}.function.name' must be a string`);
    const out: ToolCall = { function: { name, arguments: toolArguments(args, `${p}.function.arguments`) } };
    if (typeof id === 'string') out.id = id;
    return out;
  });
}

/**
 * Translates `messages`. Throws a 400 naming the exact path (`messages[2].content[0].type`) for
 * anything it cannot carry.
 */
export function toChatMessages(value: unknown): ChatMessage[] {
  if (value === undefined || value === null) invalid('messages', "you must provide 'messages'");
  if (!Array.isArray(value)) invalid('messages', "'messages' must be an array");
  if (value.length === 0) invalid('messages', "'messages' must contain at least one message");
  const out: ChatMessage[] = [];
  const toolNames = new Map<string, string>();
  let leadingSystem = true;
  value.forEach((raw, i) => {
    const p = `messages[${i}]`;
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) invalid(p, `'${p}' must be an object`);
    const m = raw as Body;
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      invalid(`${p}.role`, `'${p}.role' must be one of system, developer, user, assistant, tool; got ${JSON.stringify(m.role)}`);
    }
    const role = m.role === 'developer' ? 'system' : m.role;
    if (role === 'system') {
      const content = contentText(m.content, `${p}.content`, false);
      const prev = out.at(-1);
      if (leadingSystem && prev?.role === 'system') prev.content = `${prev.content}\n\n${content}`;
      else out.push({ role: 'system', content });
      return;
    }
    leadingSystem = false;
    if (role === 'user') {
      const { text, images, audio } = content(m.content, `${p}.content`, false);
      out.push({ role: 'user', content: text, ...(images.length > 0 ? { images } : {}), ...(audio.length > 0 ? { audio } : {}) });
    } else if (role === 'assistant') {
      const calls = toolCalls(m.tool_calls, `${p}.tool_calls`);
      const msg: ChatMessage = { role: 'assistant', content: contentText(m.content, `${p}.content`, true) };
      if (calls && calls.length > 0) {
        msg.tool_calls = calls;
        for (const c of calls) if (c.id) toolNames.set(c.id, c.function.name);
      }
      out.push(msg);
    } else if (role === 'tool') {
      const msg: ChatMessage = { role: 'tool', content: contentText(m.content, `${p}.content`, false) };
      const name = typeof m.tool_call_id === 'string' ? toolNames.get(m.tool_call_id) : undefined;
      if (name) msg.tool_name = name;
      out.push(msg);
    } else {
      // The deprecated `function` role: the result of a function call, named by `name`.
      const msg: ChatMessage = { role: 'tool', content: contentText(m.content, `${p}.content`, true) };
      if (typeof m.name === 'string') msg.tool_name = m.name;
      out.push(msg);
    }
  });
  return out;
}
