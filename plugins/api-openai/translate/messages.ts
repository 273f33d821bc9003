/**
 * OpenAI chat messages → native {@link ChatMessage}s.
 *
 * Accepted as OpenAI accepts them and as real clients send them: `developer` is `system`, and the
 * system/developer messages that open the conversation are merged into one (strict chat templates
 * refuse a second or late system message); content is a string, an array of text (or refusal)
 * parts, or — for assistant messages with `tool_calls` — `null` or absent; `tool_calls[].function
 * .arguments` is a JSON string that is parsed here; a `tool` message gets the name of the tool it
 * answers from the assistant call with the same `tool_call_id`; the deprecated `function` role is
 * a `tool` message. `image_url` parts of user messages carry images as `data:` URLs (base64),
 * which the engine checks and gives only to a model with the `vision` capability (an `http(s)` URL
 * is fetched by the engine only where the operator allows it, `engine.remoteImages`; else a 400);
 * audio and file parts are a 400; part types newer than this server are left out.
 *
 * @module
 */
import type { ChatMessage, ToolCall } from 'lia/plugin/contracts';
import { imageFromDataUrl } from 'lia/utils';
import { invalid, type Body } from './shared.js';

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool', 'function']);

/** Flattens `content` (string, parts or null) to text. `null`/absent is allowed only when `optional`. */
function contentText(value: unknown, param: string, optional: boolean): string {
  const { text, images } = content(value, param, optional);
  if (images.length > 0) invalid(param, `'${param}' may carry images only in user messages`);
  return text;
}

/** The image of an `image_url` part: its `data:` URL's base64 payload. */
function partImage(part: Body, p: string): string {
  const ref = part['image_url'];
  const url = typeof ref === 'string' ? ref : ref !== null && typeof ref === 'object' ? (ref as Body)['url'] : undefined;
  if (typeof url !== 'string') invalid(`${p}.image_url.url`, `'${p}.image_url.url' must be a string`);
  return imageFromDataUrl(url, `${p}.image_url.url`);
}

/** `content` as text (its text parts joined) and the images of its `image_url` parts. */
function content(value: unknown, param: string, optional: boolean): { text: string; images: string[] } {
  if (typeof value === 'string') return { text: value, images: [] };
  if (value === null || value === undefined) {
    if (optional) return { text: '', images: [] };
    invalid(param, `'${param}' is required`);
  }
  if (!Array.isArray(value)) invalid(param, `'${param}' must be a string or an array of content parts`);
  const texts: string[] = [];
  const images: string[] = [];
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
    } else if (type === 'input_audio' || type === 'file') {
      invalid(`${p}.type`, `content parts of type '${type}' are not supported: this endpoint takes text and images`);
    } else if (typeof type !== 'string') {
      invalid(`${p}.type`, `'${p}.type' must be a string`);
    }
    // A part type newer than this server: left out.
  });
  return { text: texts.join('\n'), images };
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
      const { text, images } = content(m.content, `${p}.content`, false);
      out.push({ role: 'user', content: text, ...(images.length > 0 ? { images } : {}) });
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
