/**
 * Forced tool calls: `toolChoice` `'required'` or `{ name }` (OpenAI's `tool_choice: "required"`
 * and a named function). node-llama-cpp's function calling lets the model decide whether to call,
 * so a forced call is generated the way vLLM forces one instead: the prompt documents the tools
 * as usual, and the answer is sampled under a grammar compiled from a JSON schema, so the output
 * can only be a call:
 *
 * - named tool → the tool's `parameters` schema; the whole output is the call's arguments;
 * - required → `{"name": <one of the tool names>, "arguments": <that tool's parameters>}`, one
 *   `oneOf` branch per tool (`name` is a `const`).
 *
 * Tool schemas are rewritten into the subset node-llama-cpp's grammar builder (`GbnfJsonSchema`
 * of 3.22.1) compiles faithfully: `anyOf` becomes `oneOf`, `definitions` becomes `$defs`, a
 * schema without a type means any JSON value, a type list becomes a `oneOf`, string formats other
 * than `date`/`time`/`date-time` are dropped (the builder would allow only ""). What it cannot
 * express (`allOf`, `not`, `if`, non-local `$ref`s, `oneOf` next to `type`, object constants)
 * is an error the session turns into a 400. Its limits, which the grammar imposes on every JSON
 * schema: every declared property is generated (`required` has no effect), keys not declared are
 * never generated unless `additionalProperties` says so, and `pattern`, `minimum`, `maximum`,
 * `multipleOf` are not enforced.
 *
 * @module
 */
import type { ToolCall, ToolDefinition } from 'lia/plugin/contracts';
import { forcedCallOf, type ForcedChoice } from 'lia/prompts';
import { toToolCalls } from './history.js';

/** A JSON schema object (loosely typed: tool schemas come from clients). */
type Schema = Record<string, unknown>;

/** An error in a tool's schema (the session answers 400 with the message). */
export class ToolSchemaError extends Error {
  override readonly name = 'ToolSchemaError';
}

/** The JSON schema the forced answer must match (see the module comment); throws {@link ToolSchemaError}. */
export function forcedToolSchema(tools: readonly ToolDefinition[], choice: ForcedChoice): Schema {
  if (tools.length === 0) throw new ToolSchemaError('a required or named tool choice needs tools');
  if (choice === 'required') {
    const branches = tools.map((tool, i) => ({
      type: 'object',
      properties: { name: { const: tool.function.name }, arguments: argumentsSchema(tool, i) },
    }));
    return branches.length === 1 ? branches[0]! : { oneOf: branches };
  }
  const i = tools.findIndex((t) => t.function.name === choice.name);
  if (i < 0) throw new ToolSchemaError(`tool choice "${choice.name}" is not one of the tools`);
  return argumentsSchema(tools[i]!, i);
}

/**
 * The tool call in a forced answer, or undefined when the text is not a complete call (the
 * generation was cut by the token limit).
 */
export function parseForcedCall(text: string, tools: readonly ToolDefinition[], choice: ForcedChoice): ToolCall[] | undefined {
  const call = forcedCallOf(text, tools, choice);
  return call && toToolCalls([{ functionName: call.name, params: call.arguments }]);
}

/** A tool's parameters as a grammar schema; absent or empty parameters mean no arguments (`{}`). */
function argumentsSchema(tool: ToolDefinition, i: number): Schema {
  const params = tool.function.parameters;
  const path = `tools[${i}].function.parameters`;
  if (params === undefined || Object.keys(params).length === 0) return { type: 'object', properties: {} };
  const schema = toGrammarSchema(params, path);
  if (schema.type !== 'object') {
    throw new ToolSchemaError(`${path} of tool "${tool.function.name}" must be a JSON schema of type "object"`);
  }
  return schema;
}

const ANY: Schema = {
  oneOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'array' }, { type: 'object', additionalProperties: true }],
};
const SCALARS = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const FORMATS = new Set(['date', 'time', 'date-time']);
const UNSUPPORTED = ['allOf', 'not', 'if', 'then', 'else', 'patternProperties', 'dependentSchemas', 'unevaluatedProperties'];

/** Rewrites a client's JSON schema into what the grammar builder compiles (module comment). */
export function toGrammarSchema(schema: unknown, path: string): Schema {
  if (schema === true) return ANY;
  if (!isObject(schema)) throw new ToolSchemaError(`${path} must be a JSON schema object`);
  for (const key of UNSUPPORTED) {
    if (key in schema) throw new ToolSchemaError(`${path}: "${key}" is not supported in the schema of a forced tool call`);
  }
  const defs = convertDefs(schema, path);
  const withDefs = (s: Schema): Schema => (defs ? { ...s, $defs: defs } : s);

  if (schema.$ref !== undefined) {
    const m = typeof schema.$ref === 'string' ? /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(schema.$ref) : null;
    if (!m) throw new ToolSchemaError(`${path}.$ref: only local references (#/$defs/NAME) are supported`);
    return withDefs({ $ref: `#/$defs/${m[1]}` });
  }
  if ('const' in schema) return withDefs({ const: literal(schema.const, `${path}.const`) });
  if (schema.enum !== undefined) {
    if (!Array.isArray(schema.enum) || schema.enum.length === 0) throw new ToolSchemaError(`${path}.enum must be a non-empty array`);
    return withDefs({ enum: schema.enum.map((v, i) => literal(v, `${path}.enum[${i}]`)) });
  }
  const altKey = schema.oneOf !== undefined ? 'oneOf' : schema.anyOf !== undefined ? 'anyOf' : undefined;
  if (altKey) {
    const alts = schema[altKey];
    if (!Array.isArray(alts) || alts.length === 0) throw new ToolSchemaError(`${path}.${altKey} must be a non-empty array`);
    if (schema.type !== undefined || schema.properties !== undefined || schema.items !== undefined) {
      throw new ToolSchemaError(`${path}: "${altKey}" next to "type", "properties" or "items" is not supported in the schema of a forced tool call`);
    }
    return withDefs({ oneOf: alts.map((alt, i) => toGrammarSchema(alt, `${path}.${altKey}[${i}]`)) });
  }

  let type = schema.type;
  if (type === undefined) {
    if (schema.properties !== undefined || schema.additionalProperties !== undefined) type = 'object';
    else if (schema.items !== undefined || schema.prefixItems !== undefined) type = 'array';
    else return withDefs(ANY);
  }
  if (Array.isArray(type)) {
    if (type.length === 0) throw new ToolSchemaError(`${path}.type must not be empty`);
    if (type.length > 1) {
      return withDefs({
        oneOf: type.map((t, i) => toGrammarSchema({ ...schema, type: t as unknown, $defs: undefined, definitions: undefined }, `${path}.type[${i}]`)),
      });
    }
    type = type[0];
  }
  if (typeof type !== 'string') throw new ToolSchemaError(`${path}.type must be a string or an array of strings`);
  if (type === 'object') return withDefs(objectSchema(schema, path));
  if (type === 'array') return withDefs(arraySchema(schema, path));
  if (!SCALARS.has(type)) throw new ToolSchemaError(`${path}.type: unknown type ${JSON.stringify(type)}`);
  if (type !== 'string') return withDefs({ type });
  const out: Schema = { type };
  if (typeof schema.format === 'string' && FORMATS.has(schema.format)) out.format = schema.format;
  else {
    const min = count(schema.minLength);
    const max = count(schema.maxLength);
    if (min !== undefined) out.minLength = min;
    if (max !== undefined) out.maxLength = max;
  }
  return withDefs(out);
}

function objectSchema(schema: Schema, path: string): Schema {
  const out: Schema = { type: 'object' };
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties)) throw new ToolSchemaError(`${path}.properties must be an object`);
    out.properties = Object.fromEntries(Object.entries(schema.properties).map(([key, value]) => [key, toGrammarSchema(value, `${path}.properties.${key}`)]));
  }
  const extra = schema.additionalProperties;
  if (extra === true || extra === false) out.additionalProperties = extra;
  else if (extra !== undefined) out.additionalProperties = toGrammarSchema(extra, `${path}.additionalProperties`);
  const min = count(schema.minProperties);
  const max = count(schema.maxProperties);
  if (min !== undefined) out.minProperties = min;
  if (max !== undefined) out.maxProperties = max;
  return out;
}

function arraySchema(schema: Schema, path: string): Schema {
  const out: Schema = { type: 'array' };
  // Draft 4–2019 tuples (`items: [...]`) are 2020-12's `prefixItems`.
  const prefix = Array.isArray(schema.items) ? schema.items : schema.prefixItems;
  const items = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
  if (prefix !== undefined) {
    if (!Array.isArray(prefix)) throw new ToolSchemaError(`${path}.prefixItems must be an array`);
    out.prefixItems = prefix.map((item, i) => toGrammarSchema(item, `${path}.prefixItems[${i}]`));
  }
  if (items === false) out.maxItems = Array.isArray(prefix) ? prefix.length : 0;
  else if (items !== undefined && items !== true) out.items = toGrammarSchema(items, `${path}.items`);
  const min = count(schema.minItems);
  const max = count(schema.maxItems);
  if (min !== undefined) out.minItems = min;
  if (max !== undefined && out.maxItems === undefined) out.maxItems = max;
  return out;
}

function convertDefs(schema: Schema, path: string): Schema | undefined {
  const defs = schema.$defs ?? schema.definitions;
  if (defs === undefined) return undefined;
  const key = schema.$defs !== undefined ? '$defs' : 'definitions';
  if (!isObject(defs)) throw new ToolSchemaError(`${path}.${key} must be an object`);
  return Object.fromEntries(Object.entries(defs).map(([name, def]) => [name, toGrammarSchema(def, `${path}.${key}.${name}`)]));
}

function literal(value: unknown, path: string): string | number | boolean | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) {
    return value;
  }
  throw new ToolSchemaError(`${path}: only string, number, boolean and null constants are supported`);
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

function isObject(value: unknown): value is Schema {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
