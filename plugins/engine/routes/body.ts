/**
 * What remains of a native request body once its route schema (schemas.ts) has checked the
 * types: mapping fields onto the engine's request types, and the few rules a schema cannot state.
 * Each rule throws a 400 that names the field.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import { checkSchemaBounds } from 'lia/utils';
import type { ChatMessage, OutputFormat, ToolCall, ToolDefinition } from '../public.js';
import { looksLikeAudio } from '../audio-input.js';
import type { ChatBodyMessage, ChatBodyTool } from './schemas.js';

/** `undefined` for an absent or `null` field (Ollama's "not set"). */
export const given = <T>(value: T | null | undefined): T | undefined => value ?? undefined;

/**
 * `format` → the engine's format: `"json"`, a JSON schema object (within the bounds of
 * `checkSchemaBounds`), or none for `""`/`null`.
 */
export function outputFormat(value: string | Record<string, unknown> | null | undefined): OutputFormat | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (value === 'json') return 'json';
  checkSchemaBounds(value, 'format');
  return value as Record<string, unknown>;
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/**
 * `messages` → chat messages: the role lower-cased (as Ollama decodes it; `developer`, OpenAI's
 * newer name for `system`, is taken as `system`), tool arguments parsed.
 */
export function chatMessages(list: ChatBodyMessage[] | null | undefined): ChatMessage[] {
  return (list ?? []).map((msg, i): ChatMessage => {
    const lower = msg.role.toLowerCase();
    const role = lower === 'developer' ? 'system' : lower;
    if (!ROLES.has(role)) throw Errors.badRequest(`messages[${i}].role must be one of system, user, assistant, tool`, { param: `messages[${i}].role` });
    const out: ChatMessage = { role: role as ChatMessage['role'], content: msg.content ?? '' };
    if (msg.tool_calls) out.tool_calls = msg.tool_calls.map((c, j) => toolCall(c, `messages[${i}].tool_calls[${j}]`));
    if (typeof msg.tool_name === 'string') out.tool_name = msg.tool_name;
    Object.assign(out, media(msg.images, msg.audio));
    return out;
  });
}

/**
 * A message's or a generation's `images` and `audio`, as the engine takes them. Ollama carries a
 * clip in `images` and tells it by its signature (a WAV); LIA does the same for every audio file
 * it decodes (`looksLikeAudio`), and also takes an `audio` list (ollama-python's proposed field).
 */
export function media(images: string[] | null | undefined, audio: string[] | null | undefined): Pick<ChatMessage, 'images' | 'audio'> {
  const out: Pick<ChatMessage, 'images' | 'audio'> = {};
  const pictures = (images ?? []).filter((d) => typeof d !== 'string' || !looksLikeAudio(d));
  const clips = [...(images ?? []).filter((d) => typeof d === 'string' && looksLikeAudio(d)), ...(audio ?? [])];
  if (pictures.length) out.images = pictures;
  if (clips.length) out.audio = clips;
  return out;
}

function toolCall(call: NonNullable<ChatBodyMessage['tool_calls']>[number], param: string): ToolCall {
  let args: unknown = call.function.arguments ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      throw Errors.badRequest(`${param}.function.arguments is not valid JSON`, { param: `${param}.function.arguments` });
    }
  }
  return { function: { name: call.function.name, arguments: args as Record<string, unknown> } };
}

function bounded<T>(schema: T, field: string): T {
  checkSchemaBounds(schema, field);
  return schema;
}

/** `tools` → function definitions (the schema has checked that each has a name; `parameters` are bounded). */
export function toolDefinitions(list: ChatBodyTool[] | null | undefined): ToolDefinition[] | undefined {
  if (!list) return undefined;
  return list.map(({ function: fn }, i): ToolDefinition => ({
    type: 'function',
    function: {
      name: fn.name,
      ...(typeof fn.description === 'string' ? { description: fn.description } : {}),
      ...(fn.parameters ? { parameters: bounded(fn.parameters, `tools[${i}].function.parameters`) } : {}),
    },
  }));
}

/** Ollama's `logprobs`/`top_logprobs` as the engine takes them: alternatives per token, or nothing. */
export function logprobsField(body: { logprobs?: boolean | null; top_logprobs?: number | null }): { logprobs?: number } {
  return body.logprobs === true ? { logprobs: body.top_logprobs ?? 0 } : {};
}
