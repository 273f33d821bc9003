/**
 * The Responses API's `instructions` and `input` → native {@link ChatMessage}s.
 *
 * - `input` as a string is one user message;
 * - a message item (`type: "message"`, or no `type` and a `role`) has `role` `user`, `assistant`,
 *   `system` or `developer` (= `system`) and `content` as a string or a list of `input_text`,
 *   `output_text` (an earlier answer sent back) and `refusal` parts, joined with `\n`, and for a
 *   user, `input_image` parts whose `image_url` is a `data:` URL (base64; an `http(s)` URL is
 *   fetched by the engine only where the operator allows it, and `file_id` needs stored files, a
 *   400); file and audio parts are a 400;
 *   part types newer than this server are left out;
 * - a `function_call` item (an earlier call sent back) becomes a tool call of an assistant message,
 *   joined to the assistant message just before it; its `arguments` is a JSON string of an object;
 *   a call with a `namespace` is named as the flattened tool is (responses-tools.ts);
 * - a `function_call_output` item is a `tool` message named after the call with its `call_id`;
 *   its `output` is a string or a list of text parts;
 * - an `item_reference` is a 400: there are no stored items to refer to;
 * - every other item (`reasoning`, which this server makes but never reads back; the calls and
 *   results of tools it cannot run, such as `web_search_call` or `custom_tool_call`; types newer
 *   than this server) is left out and reported in `ignored`.
 *
 * `instructions` and the system/developer messages that open the input are merged into one
 * system message, as chat completions do (strict chat templates refuse a second one); a later
 * one is a system message at its position.
 *
 * @module
 */
import type { ChatMessage } from 'lia/plugin/contracts';
import { imageFromDataUrl } from 'lia/utils';
import { invalid, type Body } from './shared.js';
import type { ResponseBody } from './responses-schema.js';
import { flatName } from './responses-tools.js';

const ROLES = new Set(['user', 'assistant', 'system', 'developer']);
const MEDIA_PARTS = new Set(['input_file', 'input_audio']);

/** Text of `content`: a string or a list of text parts (images refused: not this role's). */
function contentText(value: unknown, param: string): string {
  const { text, images } = content(value, param);
  if (images.length > 0) invalid(param, `'${param}' may carry images only in user messages`);
  return text;
}

/** `content` as text (its text parts joined) and the images of its `input_image` parts. */
function content(value: unknown, param: string): { text: string; images: string[] } {
  if (typeof value === 'string') return { text: value, images: [] };
  if (!Array.isArray(value)) return invalid(param, `'${param}' must be a string or an array of content parts`);
  const images: string[] = [];
  const text = value
    .map((part, i) => {
      const p = `${param}[${i}]`;
      if (part === null || typeof part !== 'object') invalid(p, `'${p}' must be a content part object`);
      const { type, text, refusal } = part as Body;
      if (type === 'input_text' || type === 'output_text') {
        return typeof text === 'string' ? text : invalid(`${p}.text`, `'${p}.text' must be a string`);
      }
      if (type === 'refusal') return typeof refusal === 'string' ? refusal : invalid(`${p}.refusal`, `'${p}.refusal' must be a string`);
      if (type === 'input_image') {
        const url = (part as Body)['image_url'];
        if (typeof url !== 'string') {
          if ((part as Body)['file_id'] !== undefined)
            invalid(`${p}.file_id`, 'images by file_id are not supported: this server stores no files; send image_url as a data: URL');
          invalid(`${p}.image_url`, `'${p}.image_url' must be a string`);
        }
        images.push(imageFromDataUrl(url, `${p}.image_url`));
        return undefined;
      }
      if (typeof type === 'string' && MEDIA_PARTS.has(type)) {
        invalid(`${p}.type`, `content parts of type '${type}' are not supported: this endpoint takes text and images`);
      }
      // A part type newer than this server: left out.
      return undefined;
    })
    .filter((t) => t !== undefined)
    .join('\n');
  return { text, images };
}

/** A required non-empty string field of an item. */
function text(item: Body, key: string, param: string): string {
  const value = item[key];
  if (typeof value !== 'string' || value === '') invalid(`${param}.${key}`, `'${param}.${key}' must be a non-empty string`);
  return value;
}

/** `arguments` of a function call: a JSON string of an object. */
function callArguments(value: unknown, param: string): Record<string, unknown> {
  if (value === undefined || value === '') return {};
  let parsed: unknown;
  try {
    parsed = typeof value === 'string' ? JSON.parse(value) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) invalid(param, `'${param}' must be a JSON-encoded object`);
  return parsed as Record<string, unknown>;
}

/** Translates `instructions` and `input` (already checked by the route schema). */
export function toResponseMessages(input: ResponseBody['input'], instructions: string | null | undefined, ignored: string[] = []): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (typeof instructions === 'string' && instructions !== '') out.push({ role: 'system', content: instructions });
  if (typeof input === 'string') {
    out.push({ role: 'user', content: input });
    return out;
  }
  const callNames = new Map<string, string>();
  let leadingSystem = true;
  input.forEach((raw, i) => {
    const p = `input[${i}]`;
    const item = raw as Body;
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined);
    if (typeof type !== 'string') invalid(`${p}.type`, `'${p}.type' is required: an item is a message (with a 'role') or names its type`);
    if (type === 'message') {
      const role = item.role;
      if (typeof role !== 'string' || !ROLES.has(role)) {
        invalid(`${p}.role`, `'${p}.role' must be one of user, assistant, system, developer; got ${JSON.stringify(role)}`);
      }
      if (role === 'system' || role === 'developer') {
        const text = contentText(item.content, `${p}.content`);
        const prev = out.at(-1);
        if (leadingSystem && prev?.role === 'system') prev.content = `${prev.content}\n\n${text}`;
        else out.push({ role: 'system', content: text });
        return;
      }
      leadingSystem = false;
      if (role === 'user') {
        const { text, images } = content(item.content, `${p}.content`);
        out.push({ role: 'user', content: text, ...(images.length > 0 ? { images } : {}) });
      } else {
        out.push({ role: 'assistant', content: contentText(item.content, `${p}.content`) });
      }
      return;
    }
    leadingSystem = false;
    if (type === 'function_call') {
      const callId = text(item, 'call_id', p);
      const own = text(item, 'name', p);
      const name = typeof item.namespace === 'string' && item.namespace !== '' ? flatName(item.namespace, own) : own;
      const call = { id: callId, function: { name, arguments: callArguments(item.arguments, `${p}.arguments`) } };
      callNames.set(callId, name);
      const prev = out.at(-1);
      if (prev?.role === 'assistant') (prev.tool_calls ??= []).push(call);
      else out.push({ role: 'assistant', content: '', tool_calls: [call] });
      return;
    }
    if (type === 'function_call_output') {
      const callId = text(item, 'call_id', p);
      const msg: ChatMessage = { role: 'tool', content: contentText(item.output, `${p}.output`) };
      const name = callNames.get(callId);
      if (name) msg.tool_name = name;
      out.push(msg);
      return;
    }
    if (type === 'item_reference') {
      invalid(`${p}.type`, 'item references are not supported: this server stores no items; send the items themselves');
    }
    ignored.push(`${p} (type '${String(type)}')`);
  });
  return out;
}
