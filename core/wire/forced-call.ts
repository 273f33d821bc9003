/**
 * A tool choice that forces a call, and the call in a forced tool answer (`tool_choice`
 * `required` or a named tool), which every local
 * engine generates as JSON under a schema: for a named tool, its arguments; for `required`, an
 * object of `name` and `arguments`. Pure string work, shared by every local engine, each of which
 * then builds its own call shape.
 *
 * @module
 */
import type { ToolChoice, ToolDefinition } from '../contracts/backend.js';

/** A forced choice: any of the tools, or the named one. */
export type ForcedChoice = 'required' | { name: string };

/** The choice when it forces a call, else undefined (`auto`, `none`, unset). */
export function forcedChoice(choice: ToolChoice | undefined): ForcedChoice | undefined {
  if (choice === 'required') return 'required';
  if (choice !== null && typeof choice === 'object' && typeof choice.name === 'string') return { name: choice.name };
  return undefined;
}

/**
 * The tool's name and arguments that `text` holds, or undefined when it is not a complete call:
 * not JSON (the generation was cut by the token limit), not an object, or, for `required`, a name
 * that is not one of `tools` or arguments that are not an object.
 */
export function forcedCallOf(
  text: string,
  tools: readonly ToolDefinition[],
  choice: ForcedChoice,
): { name: string; arguments: Record<string, unknown> } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isObject(value)) return undefined;
  if (choice !== 'required') return { name: choice.name, arguments: value };
  const { name, arguments: args } = value;
  if (typeof name !== 'string' || !tools.some((t) => t.function.name === name) || !isObject(args)) return undefined;
  return { name, arguments: args };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
