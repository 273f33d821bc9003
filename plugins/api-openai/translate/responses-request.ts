/**
 * `POST /v1/responses` body → {@link InferenceChatRequest}, plus what the response echoes.
 *
 * Mapping (Responses API → native): `instructions` and `input` → `messages` (responses-input.ts);
 * `max_output_tokens` → `num_predict`; `temperature`, `top_p` as they are (unset: the model's
 * defaults); `tools` and `tool_choice` as responses-tools.ts reads them (function tools served,
 * namespaces flattened, tools this server cannot run left out, a forced one a 400);
 * `text.format` `json_object` → `format: 'json'`, `json_schema` → `format: <schema>`;
 * `reasoning.effort` → `think` (`none` → false, any other level or none given → `'auto'`: a
 * thinking model's reasoning comes back apart, other models answer as usual).
 *
 * The server is stateless: `store` is accepted and nothing is stored (the response says
 * `store: false`); `previous_response_id`, `conversation`, `prompt` (a stored prompt) and
 * `background: true`, which need stored state, are a 400 naming the field. `metadata`, `user` and `parallel_tool_calls` are
 * echoed. Everything else the spec defines (`include`, `prompt_cache_key`, `safety_identifier`,
 * `service_tier`, `truncation`, `top_logprobs`, `reasoning.summary`, …) and fields newer than
 * it (Codex's `client_metadata`) are accepted and have no effect; the route logs them at debug.
 *
 * @module
 */
import type { InferenceChatRequest, OutputFormat, SamplingOptions } from 'lia/plugin/contracts';
import { checkSchemaBounds } from 'lia/utils';
import { invalid } from './shared.js';
import type { ResponseEcho, TextFormatEcho } from './responses-object.js';
import { toResponseMessages } from './responses-input.js';
import { ResponseBody } from './responses-schema.js';
import { responseToolChoice, responseTools, type QualifiedName } from './responses-tools.js';

/** A translated Responses request. */
export interface ResponseTranslation {
  native: InferenceChatRequest;
  stream: boolean;
  echo: ResponseEcho;
  /** Flattened tool names → the namespaced functions the client declared (for the calls' names). */
  names: Map<string, QualifiedName>;
  /** What was accepted but has no effect here (fields unknown to the spec, tools left out), for the debug log. */
  ignored: string[];
}

const STATELESS = "this server is stateless and stores no responses: send the whole conversation in 'input'";

/** Refuses the fields that need stored state. */
function refuseState(body: ResponseBody): void {
  if (body.previous_response_id != null) invalid('previous_response_id', `'previous_response_id' is not supported: ${STATELESS}`);
  if (body.conversation != null) invalid('conversation', `'conversation' is not supported: ${STATELESS}`);
  if (body.prompt != null)
    invalid('prompt', "stored prompts ('prompt') are not supported: this server stores no prompts; send the text in 'instructions' and 'input'");
  if (body.background === true) invalid('background', "'background' responses are not supported: every response is answered in its own request");
}

/** `text.format` → native `format` and its echo. */
function textFormat(format: NonNullable<ResponseBody['text']>['format']): { format?: OutputFormat; echo: TextFormatEcho } {
  if (!format || format.type === 'text') return { echo: { type: 'text' } };
  if (format.type === 'json_object') return { format: 'json', echo: { type: 'json_object' } };
  if (!format.name) invalid('text.format.name', "'text.format.name' is required with type json_schema");
  if (!format.schema) invalid('text.format.schema', "'text.format.schema' is required with type json_schema");
  checkSchemaBounds(format.schema, 'text.format.schema');
  const echo: TextFormatEcho = { type: 'json_schema', name: format.name, schema: format.schema, strict: format.strict ?? null };
  if (typeof format.description === 'string') echo.description = format.description;
  return { format: format.schema, echo };
}

/** The top-level fields of `body` that the route schema does not name (a spec newer than this server's). */
function unknownFields(body: ResponseBody): string[] {
  return Object.keys(body).filter((k) => !Object.hasOwn(ResponseBody.properties, k));
}

/** Translates a Responses body (checked by its route schema); throws a 400 with `param` for what the schema cannot rule. */
export function translateResponseRequest(body: ResponseBody): ResponseTranslation {
  refuseState(body);
  const ignored: string[] = [];
  const messages = toResponseMessages(body.input, body.instructions, ignored);
  const options: SamplingOptions = {};
  if (body.max_output_tokens != null) options.num_predict = body.max_output_tokens;
  if (body.temperature != null) options.temperature = body.temperature;
  if (body.top_p != null) options.top_p = body.top_p;
  // A thinking model's reasoning becomes a `reasoning` output item unless the client says `none`.
  const native: InferenceChatRequest = { model: body.model, messages, options, think: body.reasoning?.effort === 'none' ? false : 'auto' };

  const tools = responseTools(body.tools);
  const chosen = responseToolChoice(body.tool_choice, tools);
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
    tool_choice: chosen.echo,
    text: { format: text.echo, verbosity: body.text?.verbosity ?? 'medium' },
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    metadata: body.metadata ?? {},
  };
  if (body.user != null) echo.user = body.user;
  ignored.push(...unknownFields(body), ...tools.ignored);
  return { native, stream: body.stream ?? false, echo, names: tools.names, ignored };
}
