/**
 * `POST /v1/messages` and `/v1/messages/count_tokens` bodies → {@link InferenceChatRequest}.
 *
 * Mapping (Anthropic → native option): `max_tokens` → `num_predict`; `temperature`, `top_p`,
 * `top_k` as they are; `stop_sequences` → `stop[]`; `tools[]` (`name`, `description`,
 * `input_schema`) → function tools with `input_schema` as their parameters; `tool_choice`
 * `auto` (or unset) keeps the tools, `any` → `toolChoice: 'required'`, `{type: 'tool', name}`
 * keeps only that tool and → `toolChoice: {name}` (both forced by a grammar in the engine),
 * `none` drops the tools; `thinking` `enabled`/`adaptive` → `think: 'auto'` (a thinking model's
 * reasoning comes back as a thinking block). Unset sampling fields are left to the model's
 * defaults. `metadata`, `service_tier` and `cache_control` are ignored.
 *
 * @module
 */
import type { InferenceChatRequest, SamplingOptions, ToolChoice, ToolDefinition } from 'lia/plugin';
import { invalid, toChatMessages } from './messages.js';
import type { CountTokensBody, MessagesBody } from './schemas.js';

/** A translated Messages request. */
export interface MessagesTranslation {
  native: InferenceChatRequest;
  stream: boolean;
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

/** `tools` → native definitions; a tool of another `type` than `custom` (a server tool) is a 400. */
export function toolDefinitions(tools: CountTokensBody['tools']): ToolDefinition[] | undefined {
  if (!tools || tools.length === 0) return undefined;
  return tools.map((tool, i) => {
    if (tool.type !== undefined && tool.type !== 'custom') {
      invalid(`tools[${i}].type`, `server tools ('${tool.type}') are not supported: only custom tools with an input_schema`);
    }
    const def: ToolDefinition = { type: 'function', function: { name: tool.name, parameters: tool.input_schema } };
    if (tool.description !== undefined) def.function.description = tool.description;
    return def;
  });
}

/**
 * Applies `tool_choice` to the tools (see the module comment). A forced choice without tools,
 * or naming a tool not in `tools`, is a 400.
 */
export function chooseTools(
  choice: CountTokensBody['tool_choice'],
  tools: ToolDefinition[] | undefined,
): { tools?: ToolDefinition[]; toolChoice?: ToolChoice } {
  if (choice === undefined || choice.type === 'auto') return tools ? { tools } : {};
  if (choice.type === 'none') return {};
  if (!tools) return invalid('tool_choice', `tool_choice '${choice.type}' needs 'tools'`);
  if (choice.type === 'any') return { tools, toolChoice: 'required' };
  const picked = tools.filter((t) => t.function.name === choice.name);
  if (picked.length === 0) invalid('tool_choice.name', `tool '${choice.name}' is not in 'tools'`);
  return { tools: picked, toolChoice: { name: choice.name } };
}

/** The conversation part both endpoints share: messages, system and tools. */
function conversation(body: CountTokensBody): InferenceChatRequest {
  const native: InferenceChatRequest = { model: body.model, messages: toChatMessages(body.messages, body.system) };
  const { tools, toolChoice } = chooseTools(body.tool_choice, toolDefinitions(body.tools));
  if (tools) native.tools = tools;
  if (toolChoice) native.toolChoice = toolChoice;
  return native;
}

/** Translates a Messages body (checked by its route schema). */
export function translateMessagesRequest(body: MessagesBody): MessagesTranslation {
  const native = conversation(body);
  native.options = samplingOptions(body);
  // `thinking` enabled (or adaptive): a thinking model's reasoning comes back as a thinking block.
  const thinking = body.thinking?.type;
  if (thinking === 'enabled' || thinking === 'adaptive') native.think = 'auto';
  return { native, stream: body.stream ?? false };
}

/**
 * A count_tokens body → the chat request whose prompt the engine counts (`countChatTokens`: the
 * model's own chat template and tokenizer, nothing generated). A forced tool choice is left out
 * (it does not change the prompt, only the sampling grammar).
 */
export function translateCountRequest(body: CountTokensBody): InferenceChatRequest {
  const native = conversation(body);
  delete native.toolChoice;
  return native;
}
