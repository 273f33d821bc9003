/**
 * Anthropic messages and `system` → native {@link ChatMessage}s.
 *
 * - `system` (a string or text blocks) becomes one leading system message;
 * - a `system` (or `developer`) turn inside `messages`, as Claude Code sends them, is merged into
 *   that leading system message while no user or assistant turn came before it, and is a system
 *   message at its own position after that (the same rule as the OpenAI surfaces). Its position is
 *   kept, rather than moved into the system prompt, so the prompt's start stays the same as the
 *   conversation grows and the engine can reuse what it already evaluated; a chat template that
 *   has no place for a late system message gets it as user text (node-llama-cpp's fallback);
 * - `content` is a string or blocks: `text` blocks are joined with newlines; an assistant's
 *   `tool_use` blocks become its `tool_calls` (id, name, `input` as the arguments); a user's
 *   `tool_result` blocks become `tool` messages, placed before the user's own text and named
 *   after the `tool_use` they answer; a user's `image` blocks with a `base64` source carry
 *   images (the engine checks them and gives them only to a model with the `vision` capability;
 *   a `url` source is fetched by the engine only where the operator allows it (a 400 otherwise),
 *   a `file` source is a 400: no files are stored);
 *   images elsewhere (an assistant turn, a `tool_result`) and documents are a 400; every other block (`thinking` and `redacted_thinking` sent back, server
 *   tool blocks such as `server_tool_use` and `web_search_tool_result`, types newer than this
 *   server) is left out and reported in `ignored`. `cache_control` on any block has no effect.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import { imageFromDataUrl } from 'lia/utils';
import type { ChatMessage, ToolCall } from 'lia/engine';
import type { ContentBlock, MessagesBody } from './schemas.js';

/** Throws a 400 about `param`. */
export function invalid(param: string, message: string): never {
  throw Errors.badRequest(`${param}: ${message}`, { param });
}

const MEDIA = new Set(['image', 'document', 'search_result', 'container_upload']);

/** The base64 data of a user's `image` block (its `source`), or a 400 naming what is wrong. */
function blockImage(block: ContentBlock, param: string): string {
  const source = block['source'] as { type?: unknown; data?: unknown; url?: unknown } | undefined;
  if (source === null || typeof source !== 'object') invalid(`${param}.source`, 'must be an object');
  if (source.type === 'url') {
    // An http(s) URL goes to the engine, which fetches it only where the operator allows it.
    if (typeof source.url !== 'string') invalid(`${param}.source.url`, 'must be a string');
    return imageFromDataUrl(source.url, `${param}.source.url`);
  }
  if (source.type !== 'base64') invalid(`${param}.source.type`, `'${String(source.type)}' image sources are not supported; send a 'base64' source`);
  if (typeof source.data !== 'string') invalid(`${param}.source.data`, 'must be a string');
  return source.data;
}

/** The text of a `text` block, checked. */
function blockText(block: ContentBlock, param: string): string {
  if (typeof block['text'] !== 'string') invalid(`${param}.text`, 'must be a string');
  return block['text'];
}

/** A `tool_result`'s `content`: absent, a string, or text blocks (images refused). */
function toolResultText(value: unknown, param: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) invalid(param, 'must be a string or an array of content blocks');
  return value
    .map((b: unknown, i) => {
      const p = `${param}[${i}]`;
      if (b === null || typeof b !== 'object') invalid(p, 'must be a content block');
      const block = b as ContentBlock;
      if (block.type === 'text') return blockText(block, p);
      if (MEDIA.has(block.type)) invalid(`${p}.type`, `'${block.type}' blocks are not supported: this server takes text only`);
      return undefined;
    })
    .filter((t) => t !== undefined)
    .join('\n');
}

/** `system` → its text (the `text` of its text blocks), or undefined when absent or empty. */
export function systemText(system: MessagesBody['system']): string | undefined {
  if (system === undefined) return undefined;
  const text = typeof system === 'string' ? system : system.flatMap((b) => (b.type === 'text' && typeof b.text === 'string' ? [b.text] : [])).join('\n');
  return text.length > 0 ? text : undefined;
}

/** A system turn's text: a string, or its text blocks joined (other blocks left out). */
function systemTurnText(content: string | ContentBlock[], p: string): string {
  if (typeof content === 'string') return content;
  return content.flatMap((b, j) => (b.type === 'text' ? [blockText(b, `${p}[${j}]`)] : [])).join('\n');
}

/**
 * Translates `system` and `messages`; throws a 400 naming the exact block for what it cannot
 * carry. The paths of blocks left out are added to `ignored`.
 */
export function toChatMessages(messages: MessagesBody['messages'], system?: MessagesBody['system'], ignored: string[] = []): ChatMessage[] {
  const out: ChatMessage[] = [];
  const sys = systemText(system);
  if (sys !== undefined) out.push({ role: 'system', content: sys });
  const toolNames = new Map<string, string>();
  let leadingSystem = true;
  messages.forEach((m, i) => {
    const p = `messages[${i}].content`;
    if (m.role === 'system' || m.role === 'developer') {
      const content = systemTurnText(m.content, p);
      const prev = out.at(-1);
      if (leadingSystem && prev?.role === 'system') prev.content = `${prev.content}\n\n${content}`;
      else out.push({ role: 'system', content });
      return;
    }
    leadingSystem = false;
    if (typeof m.content === 'string') {
      out.push({ role: m.role, content: m.content });
      return;
    }
    const texts: string[] = [];
    const images: string[] = [];
    const calls: ToolCall[] = [];
    const results: ChatMessage[] = [];
    m.content.forEach((raw, j) => {
      const block = raw as ContentBlock;
      const bp = `${p}[${j}]`;
      if (block.type === 'text') texts.push(blockText(block, bp));
      else if (block.type === 'tool_use' && m.role === 'assistant') {
        const { id, name, input } = block;
        if (typeof id !== 'string' || id === '') invalid(`${bp}.id`, 'must be a non-empty string');
        if (typeof name !== 'string' || name === '') invalid(`${bp}.name`, 'must be a non-empty string');
        if (input === null || typeof input !== 'object' || Array.isArray(input)) invalid(`${bp}.input`, 'must be an object');
        calls.push({ id, function: { name, arguments: input as Record<string, unknown> } });
        toolNames.set(id, name);
      } else if (block.type === 'tool_result' && m.role === 'user') {
        const id = block['tool_use_id'];
        if (typeof id !== 'string' || id === '') invalid(`${bp}.tool_use_id`, 'must be a non-empty string');
        const result: ChatMessage = { role: 'tool', content: toolResultText(block['content'], `${bp}.content`) };
        const name = toolNames.get(id);
        if (name) result.tool_name = name;
        results.push(result);
      } else if (block.type === 'image' && m.role === 'user') {
        images.push(blockImage(block, bp));
      } else if (MEDIA.has(block.type)) {
        invalid(
          `${bp}.type`,
          `'${block.type}' blocks are not supported${block.type === 'image' ? ' in assistant messages' : ': this server takes text and images'}`,
        );
      } else if (block.type === 'tool_use' || block.type === 'tool_result') {
        invalid(`${bp}.type`, `'${block.type}' blocks belong in ${block.type === 'tool_use' ? 'assistant' : 'user'} messages`);
      } else if (block.type !== 'thinking' && block.type !== 'redacted_thinking') {
        // Earlier reasoning is dropped without a note (clients send it back as a matter of course).
        ignored.push(`${bp} (type '${block.type}')`);
      }
    });
    out.push(...results);
    if (m.role === 'assistant') {
      const msg: ChatMessage = { role: 'assistant', content: texts.join('\n') };
      if (calls.length > 0) msg.tool_calls = calls;
      out.push(msg);
    } else if (texts.length > 0 || images.length > 0 || results.length === 0) {
      out.push({ role: 'user', content: texts.join('\n'), ...(images.length > 0 ? { images } : {}) });
    }
  });
  return out;
}
