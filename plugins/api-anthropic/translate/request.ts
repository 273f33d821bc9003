/**
 * `POST /v1/messages` and `/v1/messages/count_tokens` bodies → {@link InferenceChatRequest}.
 *
 * Mapping (Anthropic → native option): `max_tokens` → `num_predict`; `temperature`, `top_p`,
 * `top_k` as they are; `stop_sequences` → `stop[]`; custom `tools[]` (no `type`, or `custom`:
 * `name`, `description`, `input_schema`) → function tools with `input_schema` as their
 * parameters; `tool_choice` `auto` (or unset) keeps the tools, `any` → `toolChoice: 'required'`,
 * `{type: 'tool', name}` keeps only that tool and → `toolChoice: {name}` (both forced by a grammar
 * in the engine), `none` drops the tools; `thinking` `enabled`/`adaptive` → `think: 'auto'` (a
 * thinking model's reasoning comes back as a thinking block; a model that does not think answers
 * as usual, since agents send `thinking` whatever the model), unset or `disabled` → `think: false`; `output_config.format` (or the
 * older top-level `output_format`) `{type: 'json_schema', schema}` → `format: <schema>`. Unset
 * sampling fields are left to the model's defaults.
 *
 * Tools of other types (server tools such as `web_search_20250305`, `code_execution_…`,
 * `web_fetch_…`; built-in client tools such as `bash_20250124`, `text_editor_…`, `computer_…`;
 * types newer than this server) are left out of the prompt; a `tool_choice` naming one is a 400.
 * `budget_tokens`, `output_config.effort`, `context_management`, `metadata`, `service_tier`,
 * `container`, `mcp_servers` and `cache_control` have no effect. What was left out is returned in
 * `ignored`, which the route logs at debug.
 *
 * @module
 */
import type { InferenceChatRequest, OutputFormat, SamplingOptions, ToolChoice, ToolDefinition } from 'lia/engine';
import { checkSchemaBounds } from 'lia/utils';
import { invalid, toChatMessages } from './messages.js';
import { CountTokensBody, MessagesBody } from './schemas.js';

/** A translated Messages request. */
export interface MessagesTranslation {
  native: InferenceChatRequest;
  stream: boolean;
  /** What was accepted without effect (blocks and tools left out, fields unknown here), for the debug log. */
  ignored: string[];
}

/** Sampling options (unset ones are left to the model). */
export function samplingOptions(body: MessagesBody): SamplingOptions {
  const options: SamplingOptions = { num_predict: body.max_tokens };
  if (body.temperature !== undefined) options.temperature = body.temperature;
  if (body.top_p !== undefined) options.top_p = body.top_p;
  if (body.top_k !== undefined) options.top_k = body.top_k;
  const stop = (body.stop_sequences ?? []).filter((s) => s.length > 0);
  if (stop.length > 0) options.stop = stop;
  return options;
}

/** The custom tools as native definitions, and the names of the tools left out. */
interface Tools {
  defs: ToolDefinition[] | undefined;
  /** Names of the server and built-in tools left out. */
  unserved: Set<string>;
}

/** `tools` → native definitions (see the module comment); `input_schema` bounded under the client's path. */
export function toolDefinitions(tools: CountTokensBody['tools'], ignored: string[] = []): Tools {
  const unserved = new Set<string>();
  const defs = (tools ?? []).flatMap((tool, i): ToolDefinition[] => {
    const p = `tools[${i}]`;
    if (tool.type !== undefined && tool.type !== 'custom') {
      if (tool.name !== undefined) unserved.add(tool.name);
      ignored.push(`${p} (type '${tool.type}')`);
      return [];
    }
    if (tool.name === undefined) return invalid(`${p}.name`, 'is required');
    if (tool.input_schema === undefined) return invalid(`${p}.input_schema`, 'is required');
    checkSchemaBounds(tool.input_schema, `${p}.input_schema`);
    const def: ToolDefinition = { type: 'function', function: { name: tool.name, parameters: tool.input_schema } };
    if (tool.description !== undefined) def.function.description = tool.description;
    return [def];
  });
  return { defs: defs.length > 0 ? defs : undefined, unserved };
}

/**
 * Applies `tool_choice` to the tools (see the module comment). A forced choice without tools,
 * naming a tool not in `tools`, or naming a tool this server cannot run, is a 400.
 */
export function chooseTools(choice: CountTokensBody['tool_choice'], { defs: tools, unserved }: Tools): { tools?: ToolDefinition[]; toolChoice?: ToolChoice } {
  if (choice === undefined || choice.type === 'auto') return tools ? { tools } : {};
  if (choice.type === 'none') return {};
  if (choice.type === 'tool' && unserved.has(choice.name)) {
    invalid('tool_choice.name', `tool '${choice.name}' is a server or built-in tool, which this server cannot run`);
  }
  if (!tools) return invalid('tool_choice', `tool_choice '${choice.type}' needs 'tools' (custom ones: server and built-in tools are left out)`);
  if (choice.type === 'any') return { tools, toolChoice: 'required' };
  const picked = tools.filter((t) => t.function.name === choice.name);
  if (picked.length === 0) invalid('tool_choice.name', `tool '${choice.name}' is not in 'tools'`);
  return { tools: picked, toolChoice: { name: choice.name } };
}

/** `output_config.format` or `output_format` → native `format` (a schema, bounded under the client's path). */
function outputFormat(body: CountTokensBody): OutputFormat | undefined {
  const legacy = (body as { output_format?: unknown }).output_format;
  const [format, param] = body.output_config?.format ? [body.output_config.format, 'output_config.format'] : [legacy, 'output_format'];
  if (format === undefined || format === null) return undefined;
  if (typeof format !== 'object' || Array.isArray(format)) return invalid(param, 'must be an object');
  const { type, schema } = format as { type?: unknown; schema?: unknown };
  if (type !== 'json_schema') return invalid(`${param}.type`, `must be 'json_schema'; got ${JSON.stringify(type)}`);
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return invalid(`${param}.schema`, 'is required with type json_schema');
  checkSchemaBounds(schema, `${param}.schema`);
  return schema as Record<string, unknown>;
}

/** The top-level fields of `body` that `schema` does not name. */
function unknownFields(body: object, schema: { properties: object }): string[] {
  return Object.keys(body).filter((k) => !Object.hasOwn(schema.properties, k) && k !== 'output_format');
}

/** The conversation part both endpoints share: messages, system and tools. */
function conversation(body: CountTokensBody, ignored: string[]): InferenceChatRequest {
  const native: InferenceChatRequest = { model: body.model, messages: toChatMessages(body.messages, body.system, ignored) };
  const { tools, toolChoice } = chooseTools(body.tool_choice, toolDefinitions(body.tools, ignored));
  if (tools) native.tools = tools;
  if (toolChoice) native.toolChoice = toolChoice;
  return native;
}

/** Translates a Messages body (checked by its route schema). */
export function translateMessagesRequest(body: MessagesBody): MessagesTranslation {
  const ignored = unknownFields(body, MessagesBody);
  const native = conversation(body, ignored);
  native.options = samplingOptions(body);
  // `thinking` enabled (or adaptive): a thinking model's reasoning comes back as a thinking block.
  // Unset or `disabled`: thinking is off, as on Anthropic's API (a template with a switch, such as
  // Qwen3's, is rendered with thinking off), so no reasoning text reaches the answer's text block.
  const thinking = body.thinking?.type;
  native.think = thinking === 'enabled' || thinking === 'adaptive' ? 'auto' : false;
  const format = outputFormat(body);
  if (format !== undefined) native.format = format;
  return { native, stream: body.stream ?? false, ignored };
}

/**
 * A count_tokens body → the chat request whose prompt the engine counts (`countChatTokens`: the
 * model's own chat template and tokenizer, nothing generated). A forced tool choice is left out
 * (it does not change the prompt, only the sampling grammar).
 */
export function translateCountRequest(body: CountTokensBody): { native: InferenceChatRequest; ignored: string[] } {
  const ignored = unknownFields(body, CountTokensBody);
  const native = conversation(body, ignored);
  delete native.toolChoice;
  return { native, ignored };
}
