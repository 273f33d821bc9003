/**
 * Conversions between the engine's chat shapes (Ollama's messages and tools) and node-llama-cpp's
 * chat history and handler-less functions. Tools are declared to the model and their calls are
 * returned to the client, never executed.
 *
 * @module
 */
import { randomInt } from 'node:crypto';
import type { ChatHistoryItem, ChatModelFunctionCall, ChatModelFunctions } from 'node-llama-cpp';
import type { ChatMessage, ToolCall, ToolDefinition } from 'lia/engine';

/**
 * Builds the history LlamaChat expects. Assistant `tool_calls` become function calls, and the
 * `tool` messages that follow fill in their results in order (by name when it is given).
 */
export function toChatHistory(messages: readonly ChatMessage[]): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  for (const m of messages) {
    if (m.role === 'system') {
      history.push({ type: 'system', text: m.content });
    } else if (m.role === 'user') {
      history.push({ type: 'user', text: m.content });
    } else if (m.role === 'assistant') {
      const response: (string | ChatModelFunctionCall)[] = [];
      if (m.content) response.push(m.content);
      (m.tool_calls ?? []).forEach((call, i) => {
        response.push({
          type: 'functionCall',
          name: call.function.name,
          params: call.function.arguments,
          result: undefined,
          startsNewChunk: i === 0,
        });
      });
      history.push({ type: 'model', response });
    } else {
      attachToolResult(history, m);
    }
  }
  return history;
}

function attachToolResult(history: ChatHistoryItem[], message: ChatMessage): void {
  const last = history.at(-1);
  if (last?.type === 'model') {
    const pending = last.response.filter((r): r is ChatModelFunctionCall => typeof r === 'object' && r.type === 'functionCall' && r.result === undefined);
    const call = pending.find((c) => message.tool_name === undefined || c.name === message.tool_name) ?? pending[0];
    if (call) {
      call.result = parseMaybeJson(message.content);
      return;
    }
  }
  // A tool result with no call to answer: show it to the model as user text.
  history.push({ type: 'user', text: message.content });
}

function parseMaybeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Declares tools as handler-less functions (the model may call them; nothing runs them). */
export function toFunctions(tools: readonly ToolDefinition[]): ChatModelFunctions {
  const functions: Record<string, { description?: string; params?: unknown }> = {};
  for (const tool of tools) {
    const params = tool.function.parameters;
    functions[tool.function.name] = {
      ...(tool.function.description ? { description: tool.function.description } : {}),
      ...(params && Object.keys(params).length > 0 ? { params } : {}),
    };
  }
  return functions as ChatModelFunctions;
}

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** `call_` and 8 random `[a-z0-9]`, as Ollama names tool calls. */
export function toolCallId(): string {
  let id = 'call_';
  for (let i = 0; i < 8; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** Converts node-llama-cpp's function calls to the engine's tool calls. */
export function toToolCalls(calls: readonly { functionName: string; params: unknown }[]): ToolCall[] {
  return calls.map((c, index) => ({
    id: toolCallId(),
    function: {
      index,
      name: c.functionName,
      arguments: c.params && typeof c.params === 'object' ? (c.params as Record<string, unknown>) : {},
    },
  }));
}
