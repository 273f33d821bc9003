/**
 * `POST /v1/responses` body → {@link InferenceChatRequest}, plus what the response echoes.
 *
 * Mapping (Responses API → native): `instructions` and `input` → `messages` (responses-input.ts);
 * `max_output_tokens` → `num_predict`; `temperature`, `top_p` as they are (unset: the model's
 * defaults); `tools` (flat `function` tools) → `tools`; `tool_choice` as in chat completions
 * (`none` drops the tools, `required` and `{type: "function", name}` force one call through a
 * grammar); `text.format` `json_object` → `format: 'json'`, `json_schema` → `format: <schema>`.
 *
 * The server is stateless: `store` is accepted and nothing is stored (the response says
 * `store: false`); `previous_response_id`, `conversation` and `background: true`, which need
 * stored responses, are a 400 naming the field. `metadata`, `user` and `parallel_tool_calls` are
 * echoed. Tools other than `function`, and a `tool_choice` forcing one, are a 400.
 *
 * @module
 */
import type { InferenceChatRequest, OutputFormat, SamplingOptions, ToolDefinition } from 'lia/plugin';
import { chooseTools, type ToolChoiceRequest } from './chat-request.js';
import { invalid } from './fields.js';
import type { FunctionToolEcho, ResponseEcho, TextFormatEcho, ToolChoiceEcho } from './responses-object.js';
import { toResponseMessages } from './responses-input.js';
import type { ResponseBody } from './responses-schema.js';

/** A translated Responses request. */
export interface ResponseTranslation {
  native: InferenceChatRequest;
  stream: boolean;
  echo: ResponseEcho;
}

const STATELESS = 'this server is stateless and stores no responses: send the whole conversation in \'input\'';

/** Refuses the fields that need stored state. */
function refuseState(body: ResponseBody): void {
  if (body.previous_response_id != null) invalid('previous_response_id', `'previous_response_id' is not supported: ${STATELESS}`);
  if (body.conversation != null) invalid('conversation', `'conversation' is not supported: ${STATELESS}`);
  if (body.background === true) invalid('background', "'background' responses are not supported: every response is answered in its own request");
}

/** `tools` → native definitions and their echo; only `function` tools are served. */
function functionTools(tools: ResponseBody['tools']): { defs: ToolDefinition[]; echo: FunctionToolEcho[] } {
  const defs: ToolDefinition[] = [];
  const echo: FunctionToolEcho[] = [];
  (tools ?? []).forEach((tool, i) => {
    if (tool.type !== 'function') invalid(`tools[${i}].type`, `tools of type '${tool.type}' are not supported: only 'function' tools are`);
    if (tool.name === undefined) invalid(`tools[${i}].name`, `'tools[${i}].name' is required`);
    const def: ToolDefinition = { type: 'function', function: { name: tool.name } };
    if (typeof tool.description === 'string') def.function.description = tool.description;
    if (tool.parameters) def.function.parameters = tool.parameters;
    defs.push(def);
    echo.push({ type: 'function', name: tool.name, description: tool.description ?? null, parameters: tool.parameters ?? null, strict: tool.strict ?? null });
  });
  return { defs, echo };
}

/** `tool_choice` → the shared request form and its echo. */
function toolChoice(choice: ResponseBody['tool_choice']): { request: ToolChoiceRequest; echo: ToolChoiceEcho } {
  if (choice === undefined || choice === null) return { request: undefined, echo: 'auto' };
  if (typeof choice === 'string') return { request: choice, echo: choice };
  if (choice.type !== 'function') invalid('tool_choice.type', `'tool_choice' of type '${choice.type}' is not supported: use none, auto, required or a function`);
  if (!choice.name) invalid('tool_choice.name', "'tool_choice.name' is required");
  return { request: { name: choice.name }, echo: { type: 'function', name: choice.name } };
}

/** `text.format` → native `format` and its echo. */
function textFormat(format: NonNullable<ResponseBody['text']>['format']): { format?: OutputFormat; echo: TextFormatEcho } {
  if (!format || format.type === 'text') return { echo: { type: 'text' } };
  if (format.type === 'json_object') return { format: 'json', echo: { type: 'json_object' } };
  if (!format.name) invalid('text.format.name', "'text.format.name' is required with type json_schema");
  if (!format.schema) invalid('text.format.schema', "'text.format.schema' is required with type json_schema");
  const echo: TextFormatEcho = { type: 'json_schema', name: format.name, schema: format.schema, strict: format.strict ?? null };
  if (typeof format.description === 'string') echo.description = format.description;
  return { format: format.schema, echo };
}

/** Translates a Responses body (checked by its route schema); throws a 400 with `param` for what the schema cannot rule. */
export function translateResponseRequest(body: ResponseBody): ResponseTranslation {
  refuseState(body);
  const messages = toResponseMessages(body.input, body.instructions);
  const options: SamplingOptions = {};
  if (body.max_output_tokens != null) options.num_predict = body.max_output_tokens;
  if (body.temperature != null) options.temperature = body.temperature;
  if (body.top_p != null) options.top_p = body.top_p;
  // A thinking model's reasoning becomes a `reasoning` output item unless the client says `none`.
  const native: InferenceChatRequest = { model: body.model, messages, options, think: body.reasoning?.effort === 'none' ? false : 'auto' };

  const tools = functionTools(body.tools);
  const choice = toolChoice(body.tool_choice);
  const chosen = chooseTools(choice.request, tools.defs, 'tool_choice.name');
  if (chosen.tools) native.tools = chosen.tools;
  if (chosen.toolChoice) native.toolChoice = chosen.toolChoice;

  const text = textFormat(body.text?.format);
  if (text.format !== undefined) native.format = text.format;

  const echo: ResponseEcho = {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    temperature: body.temperature ?? null,
    top_p: body.top_p ?? null,
    tools: tools.echo,
    tool_choice: choice.echo,
    text: { format: text.echo, verbosity: body.text?.verbosity ?? 'medium' },
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    metadata: body.metadata ?? {},
  };
  if (body.user != null) echo.user = body.user;
  return { native, stream: body.stream ?? false, echo };
}
