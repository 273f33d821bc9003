/**
 * Request-body readers for the native inference routes. Each returns the typed field or throws a
 * 400 that names it, so handlers stay a list of field reads. Unknown fields are ignored, as Ollama
 * does.
 *
 * @module
 */
import { Errors } from '../../../core/index.js';
import type { ChatMessage, OutputFormat, ToolCall, ToolDefinition } from '../../../core/contracts/backend.js';
import type { KeepAlive } from '../../../core/contracts/inference.js';

export type Body = Record<string, unknown>;

/** The body as an object; a missing body is Ollama's `missing request body`. */
export function objectBody(body: unknown): Body {
  if (body === undefined || body === null || body === '') throw Errors.badRequest('missing request body');
  if (typeof body !== 'object' || Array.isArray(body)) throw Errors.badRequest('the request body must be a JSON object');
  return body as Body;
}

export function requiredModel(body: Body): string {
  const model = body['model'];
  if (model === undefined || model === null || model === '') throw Errors.badRequest('model is required', { param: 'model' });
  if (typeof model !== 'string') throw Errors.badRequest('"model" must be a string', { param: 'model' });
  return model;
}

export function optionalString(body: Body, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw Errors.badRequest(`"${key}" must be a string`, { param: key });
  return v;
}

export function optionalBool(body: Body, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw Errors.badRequest(`"${key}" must be a boolean`, { param: key });
  return v;
}

export function optionalInt(body: Body, key: string, min: number): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw Errors.badRequest(`"${key}" must be an integer ≥ ${min}`, { param: key });
  return v;
}

/** `keep_alive`: a number of seconds or a duration string (parsed later, with its own errors). */
export function keepAlive(body: Body): KeepAlive | undefined {
  const v = body['keep_alive'];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' && typeof v !== 'string') throw Errors.badRequest(`invalid keep_alive: unsupported type ${typeof v}`, { param: 'keep_alive' });
  return v;
}

/** `format`: `"json"`, a JSON schema object, or nothing (`null`, `""`). */
export function format(body: Body): OutputFormat | undefined {
  const v = body['format'];
  if (v === undefined || v === null || v === '') return undefined;
  if (v === 'json') return 'json';
  if (typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  throw Errors.badRequest(`invalid format: ${JSON.stringify(v)}; expected "json" or a valid JSON Schema object`, { param: 'format' });
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/** `messages`: role (lower-cased, as Ollama decodes it) and content, plus tool fields. */
export function messages(body: Body): ChatMessage[] {
  const v = body['messages'];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw Errors.badRequest('"messages" must be an array', { param: 'messages' });
  return v.map((m: unknown, i): ChatMessage => {
    if (typeof m !== 'object' || m === null) throw Errors.badRequest(`messages[${i}] must be an object`, { param: 'messages' });
    const msg = m as Record<string, unknown>;
    const role = typeof msg['role'] === 'string' ? msg['role'].toLowerCase() : '';
    if (!ROLES.has(role)) throw Errors.badRequest(`messages[${i}].role must be one of system, user, assistant, tool`, { param: 'messages' });
    const content = msg['content'] ?? '';
    if (typeof content !== 'string') throw Errors.badRequest(`messages[${i}].content must be a string`, { param: 'messages' });
    const out: ChatMessage = { role: role as ChatMessage['role'], content };
    if (Array.isArray(msg['tool_calls'])) out.tool_calls = (msg['tool_calls'] as unknown[]).map((c, j) => toolCall(c, i, j));
    if (typeof msg['tool_name'] === 'string') out.tool_name = msg['tool_name'];
    return out;
  });
}

function toolCall(c: unknown, i: number, j: number): ToolCall {
  const fn = (c as { function?: { name?: unknown; arguments?: unknown } } | null)?.function;
  if (!fn || typeof fn.name !== 'string') throw Errors.badRequest(`messages[${i}].tool_calls[${j}].function.name is required`, { param: 'messages' });
  let args = fn.arguments ?? {};
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args);
    } catch {
      throw Errors.badRequest(`messages[${i}].tool_calls[${j}].function.arguments is not valid JSON`, { param: 'messages' });
    }
  }
  return { function: { name: fn.name, arguments: args as Record<string, unknown> } };
}

/** `tools`: function definitions with a name. */
export function tools(body: Body): ToolDefinition[] | undefined {
  const v = body['tools'];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v)) throw Errors.badRequest('"tools" must be an array', { param: 'tools' });
  return v.map((t: unknown, i): ToolDefinition => {
    const fn = (t as { function?: Record<string, unknown> } | null)?.function;
    if (!fn || typeof fn['name'] !== 'string' || fn['name'] === '') throw Errors.badRequest(`tools[${i}].function.name is required`, { param: 'tools' });
    return {
      type: 'function',
      function: {
        name: fn['name'],
        ...(typeof fn['description'] === 'string' ? { description: fn['description'] } : {}),
        ...(fn['parameters'] && typeof fn['parameters'] === 'object' ? { parameters: fn['parameters'] as Record<string, unknown> } : {}),
      },
    };
  });
}

/**
 * Features the llama.cpp backend cannot serve, refused up front as Ollama refuses them for a model
 * without the capability: `images` (no multimodal support in node-llama-cpp 3.22) and `think`.
 */
export function refuseUnsupported(body: Body, model: string): void {
  const think = body['think'];
  if (think !== undefined && think !== null && think !== false) {
    if (typeof think !== 'boolean' && !['low', 'medium', 'high', 'max'].includes(String(think))) {
      throw Errors.badRequest(`invalid think value: ${JSON.stringify(think)}`, { param: 'think' });
    }
    throw Errors.badRequest(`"${model}" does not support thinking`, { param: 'think' });
  }
  const msgs = Array.isArray(body['messages']) ? (body['messages'] as { images?: unknown }[]) : [];
  const hasImages = (v: unknown) => Array.isArray(v) && v.length > 0;
  if (hasImages(body['images']) || msgs.some((m) => m && hasImages(m.images))) {
    throw Errors.badRequest(`"${model}" does not support images`, { param: 'images' });
  }
}
