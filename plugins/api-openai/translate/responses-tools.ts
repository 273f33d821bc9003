/**
 * The Responses API's `tools` and `tool_choice` → native tools, their echo, and the names the
 * model's calls go back under.
 *
 * - `function` tools are served as they are;
 * - a `namespace` tool (a group of function tools, as Codex sends its MCP servers' tools) is
 *   flattened: each function inside becomes one tool named `<namespace>__<name>` (no separator is
 *   added when the namespace already ends with `_`), and a call of it goes back to the client as a
 *   `function_call` with the function's own `name` and the `namespace` field, as OpenAI returns it.
 *   `custom` tools inside a namespace are left out like top-level ones;
 * - every other type (`web_search`, `web_search_preview`, `file_search`, `computer_use_preview`,
 *   `code_interpreter`, `image_generation`, `mcp`, `local_shell`, `shell`, `apply_patch`,
 *   `custom`, `tool_search`, and types newer than this server) names a tool this server cannot
 *   run: it is left out of the prompt and reported as ignored. A `tool_choice` that forces one of
 *   them is a 400 naming `tool_choice.type`.
 *
 * `tool_choice`: `none`, `auto`, `required`, `{type: "function", name}` (the flattened name, or a
 * function's own name when only one namespace has it) and `{type: "allowed_tools", mode, tools}`
 * (the tools narrowed to the listed functions; `mode: "required"` forces one call).
 *
 * Each tool's `parameters` is bounded (`checkSchemaBounds`) under the path the client sent:
 * `tools[2].parameters`, `tools[3].tools[0].parameters`.
 *
 * @module
 */
import type { ToolDefinition } from 'lia/plugin/contracts';
import { checkSchemaBounds } from 'lia/utils';
import { chooseTools, type ToolChoiceRequest } from './chat-request.js';
import { invalid, type Body } from './shared.js';
import type { ToolChoiceEcho } from './responses-object.js';
import type { ResponseBody } from './responses-schema.js';

/** What a flattened tool name stands for: the function's own name and its namespace. */
export interface QualifiedName {
  name: string;
  namespace: string;
}

/** The native tools, the echo of `tools`, the flattened names, and what was left out. */
export interface ResponseTools {
  defs: ToolDefinition[];
  echo: Record<string, unknown>[];
  /** Flattened name → the function and namespace the client knows. */
  names: Map<string, QualifiedName>;
  /** Paths of tools left out (`tools[1]` of type `web_search`…), for the debug log. */
  ignored: string[];
}

/** The name the model sees for `name` inside `namespace`. */
export function flatName(namespace: string, name: string): string {
  return namespace.endsWith('_') ? `${namespace}${name}` : `${namespace}__${name}`;
}

/** One function tool (top-level or in a namespace) → its definition; `param` is its path. */
function functionDef(tool: Body, param: string, name: string): ToolDefinition {
  const def: ToolDefinition = { type: 'function', function: { name } };
  if (typeof tool['description'] === 'string') def.function.description = tool['description'];
  const parameters = tool['parameters'];
  if (parameters !== null && parameters !== undefined) {
    if (typeof parameters !== 'object' || Array.isArray(parameters)) invalid(`${param}.parameters`, `'${param}.parameters' must be an object`);
    checkSchemaBounds(parameters, `${param}.parameters`);
    def.function.parameters = parameters as Record<string, unknown>;
  }
  return def;
}

/** A required non-empty `name` of a tool. */
function toolName(tool: Body, param: string): string {
  const name = tool['name'];
  if (typeof name !== 'string' || name === '') invalid(`${param}.name`, `'${param}.name' is required`);
  return name;
}

/** Reads `tools` (see the module comment). */
export function responseTools(tools: ResponseBody['tools']): ResponseTools {
  const out: ResponseTools = { defs: [], echo: [], names: new Map(), ignored: [] };
  (tools ?? []).forEach((raw, i) => {
    const tool = raw as Body;
    const p = `tools[${i}]`;
    if (tool['type'] === 'function') {
      const name = toolName(tool, p);
      out.defs.push(functionDef(tool, p, name));
      out.echo.push({
        type: 'function',
        name,
        description: tool['description'] ?? null,
        parameters: tool['parameters'] ?? null,
        strict: tool['strict'] ?? null,
      });
      return;
    }
    out.echo.push(tool);
    if (tool['type'] !== 'namespace') {
      out.ignored.push(`${p} (type '${String(tool['type'])}')`);
      return;
    }
    const namespace = toolName(tool, p);
    const inner = tool['tools'];
    if (!Array.isArray(inner)) invalid(`${p}.tools`, `'${p}.tools' must be an array of tools`);
    inner.forEach((rawInner: unknown, j) => {
      const ip = `${p}.tools[${j}]`;
      if (rawInner === null || typeof rawInner !== 'object' || Array.isArray(rawInner)) invalid(ip, `'${ip}' must be a tool object`);
      const fn = rawInner as Body;
      if (fn['type'] !== 'function') {
        out.ignored.push(`${ip} (type '${String(fn['type'])}')`);
        return;
      }
      const name = toolName(fn, ip);
      const flat = flatName(namespace, name);
      out.defs.push(functionDef(fn, ip, flat));
      out.names.set(flat, { name, namespace });
    });
  });
  return out;
}

/** The native name a client's function name stands for: itself, or the one namespaced function of that name. */
function nativeName(name: string, tools: ResponseTools): string {
  if (tools.defs.some((d) => d.function.name === name && !tools.names.has(name))) return name;
  const inNamespaces = [...tools.names].filter(([, q]) => q.name === name);
  return inNamespaces.length === 1 ? inNamespaces[0]![0] : name;
}

/** A forced choice of a tool this server cannot run: a 400. */
function hostedChoice(type: string): never {
  return invalid(
    'tool_choice.type',
    `'tool_choice' forces a tool of type '${type}', which this server cannot run: use none, auto, required, a function or allowed_tools`,
  );
}

/** `tool_choice` applied to the tools: the native tools and choice, and the echo. */
export function responseToolChoice(
  choice: ResponseBody['tool_choice'],
  tools: ResponseTools,
): { tools?: ToolDefinition[]; toolChoice?: ReturnType<typeof chooseTools>['toolChoice']; echo: ToolChoiceEcho } {
  if (choice === undefined || choice === null || typeof choice === 'string') {
    const mode = choice ?? 'auto';
    return { ...chooseTools(mode, tools.defs, 'tool_choice.name'), echo: mode };
  }
  const c = choice as Body;
  if (c['type'] === 'function') {
    if (typeof c['name'] !== 'string' || c['name'] === '') invalid('tool_choice.name', "'tool_choice.name' is required");
    const request: ToolChoiceRequest = { name: nativeName(c['name'], tools) };
    return { ...chooseTools(request, tools.defs, 'tool_choice.name'), echo: { type: 'function', name: c['name'] } };
  }
  if (c['type'] === 'allowed_tools') {
    // The listed functions stay (other listed types name tools left out anyway).
    if (!Array.isArray(c['tools'])) invalid('tool_choice.tools', "'tool_choice.tools' must be an array of tools");
    const allowed = new Set(
      (c['tools'] as unknown[]).flatMap((t) => {
        const entry = (t ?? {}) as Body;
        return entry['type'] === 'function' && typeof entry['name'] === 'string' ? [nativeName(entry['name'], tools)] : [];
      }),
    );
    const mode = c['mode'] === 'required' ? 'required' : 'auto';
    return {
      ...chooseTools(
        mode,
        tools.defs.filter((d) => allowed.has(d.function.name)),
        'tool_choice.tools',
      ),
      echo: c,
    };
  }
  return hostedChoice(String(c['type']));
}
