/**
 * A tool choice that forces a call (`tool_choice` `required` or a named tool), and the call in the
 * answer: a local engine samples the answer under the call's schema (answer-schema.ts) and streams
 * it as text like any constrained answer; the plan turns that text into one `tool_calls` event, so
 * no engine parses calls of its own. The text never reaches the client: the answer ends with the
 * call, or, cut by `num_predict` before the call was complete, with `length` and neither text nor
 * call.
 *
 * @module
 */
import type { GenerationEvent, ToolCall, ToolDefinition } from '../public.js';

/** A forced choice: any of the tools, or the named one. */
export type ForcedChoice = 'required' | { name: string };

/**
 * The events of a forced call's answer: its text held back and, at `done`, the call it makes. A
 * complete answer that is not a call (the grammar admits only calls, so the engine failed it) ends
 * like a cut one, with `length`.
 */
export async function* asForcedCall(
  events: AsyncIterable<GenerationEvent>,
  tools: readonly ToolDefinition[],
  choice: ForcedChoice,
): AsyncIterable<GenerationEvent> {
  let text = '';
  for await (const event of events) {
    if (event.type === 'token') text += event.text;
    else if (event.type === 'done') {
      const call = event.reason === 'length' ? undefined : callOf(text, tools, choice);
      if (call) yield { type: 'tool_calls', calls: [call] };
      yield call || event.reason === 'length' ? event : { ...event, reason: 'length' };
    } else if (event.type !== 'thinking') yield event;
  }
}

/**
 * The call `text` holds, or undefined when it is not a complete one: not JSON (cut by the token
 * limit), not an object, or, for `required`, a name that is not one of `tools` or arguments that
 * are not an object.
 */
export function callOf(text: string, tools: readonly ToolDefinition[], choice: ForcedChoice): ToolCall | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(value)) return undefined;
  if (choice !== 'required') return { function: { index: 0, name: choice.name, arguments: value } };
  const { name, arguments: args } = value;
  if (typeof name !== 'string' || !tools.some((t) => t.function.name === name) || !isObject(args)) return undefined;
  return { function: { index: 0, name, arguments: args } };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
