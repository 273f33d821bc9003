/**
 * The JSON schema an answer is sampled under, the same on every GGUF engine: an output format
 * (`format`) and a forced tool call (`toolChoice` `'required'` or `{ name }`) are both an answer
 * that must match a schema, compiled into a grammar by the engine (node-llama-cpp's
 * `GbnfJsonSchema` builder, llama.cpp's `json_schema`). The schema is rewritten here into the
 * subset both compilers treat alike, so a request is taken or refused the same way on each:
 *
 * - `anyOf` becomes `oneOf`, `definitions` becomes `$defs`, a schema without a type means any JSON
 *   value, a type list becomes a `oneOf`, string formats other than `date`/`time`/`date-time` are
 *   dropped;
 * - every declared property is generated (`required` lists them all: node-llama-cpp's builder
 *   ignores `required`, llama.cpp's would leave the others out), and undeclared keys only where
 *   `additionalProperties` admits them;
 * - what neither compiles the same (`allOf`, `not`, `if`, non-local `$ref`s, `oneOf` beside
 *   `type`, object constants) is a 400 naming the place; `pattern`, `minimum`, `maximum` and
 *   `multipleOf` are dropped (node-llama-cpp does not enforce them).
 *
 * A forced call's schema (as vLLM forces one): for a named tool, the tool's `parameters` (the
 * whole answer is the call's arguments); for `required`, `{"name": <one of the tools>,
 * "arguments": <its parameters>}`, one `oneOf` branch per tool, `name` a `const`.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { ToolDefinition } from '../public.js';
import type { ForcedChoice } from './forced-call.js';

/** A JSON schema object (loosely typed: schemas come from clients). */
type Schema = Record<string, unknown>;

/** The schema a forced call's answer must match (see the module comment). */
export function forcedCallSchema(tools: readonly ToolDefinition[], choice: ForcedChoice): Schema {
  if (choice === 'required') {
    const branches = tools.map((tool, i) => ({
      type: 'object',
      properties: { name: { const: tool.function.name }, arguments: argumentsSchema(tool, i) },
      required: ['name', 'arguments'],
    }));
    return branches.length === 1 ? branches[0]! : { oneOf: branches };
  }
  const i = tools.findIndex((t) => t.function.name === choice.name);
  return argumentsSchema(tools[i]!, i);
}

/** An output format's schema in the common subset; `param` names the field in errors. */
export function formatSchema(schema: Record<string, unknown>, param = 'format'): Schema {
  return answerSchema(schema, param, param);
}

/** A tool's parameters in the common subset; absent or empty parameters mean no arguments (`{}`). */
function argumentsSchema(tool: ToolDefinition, i: number): Schema {
  const params = tool.function.parameters;
  const path = `tools[${i}].function.parameters`;
  if (params === undefined || Object.keys(params).length === 0) return { type: 'object', properties: {}, required: [] };
  const schema = answerSchema(params, path, 'tools');
  if (schema.type !== 'object') throw refused('tools', `${path} of tool "${tool.function.name}" must be a JSON schema of type "object"`);
  return schema;
}

function refused(param: string, message: string): Error {
  return Errors.badRequest(message, { param });
}

const ANY: Schema = {
  oneOf: [{ type: ['string', 'number', 'boolean', 'null'] }, { type: 'array' }, { type: 'object', additionalProperties: true }],
};
const SCALARS = new Set(['string', 'number', 'integer', 'boolean', 'null']);
const FORMATS = new Set(['date', 'time', 'date-time']);
const UNSUPPORTED = ['allOf', 'not', 'if', 'then', 'else', 'patternProperties', 'dependentSchemas', 'unevaluatedProperties'];

/** `schema` rewritten into the common subset (module comment); `param` is the request field errors name. */
function answerSchema(schema: unknown, path: string, param: string): Schema {
  if (schema === true) return ANY;
  if (!isObject(schema)) throw refused(param, `${path} must be a JSON schema object`);
  for (const key of UNSUPPORTED) {
    if (key in schema) throw refused(param, `${path}: "${key}" is not supported in an answer schema`);
  }
  const defs = convertDefs(schema, path, param);
  const withDefs = (s: Schema): Schema => (defs ? { ...s, $defs: defs } : s);

  if (schema.$ref !== undefined) {
    const m = typeof schema.$ref === 'string' ? /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(schema.$ref) : null;
    if (!m) throw refused(param, `${path}.$ref: only local references (#/$defs/NAME) are supported`);
    return withDefs({ $ref: `#/$defs/${m[1]}` });
  }
  if ('const' in schema) return withDefs({ const: literal(schema.const, `${path}.const`, param) });
  if (schema.enum !== undefined) {
    if (!Array.isArray(schema.enum) || schema.enum.length === 0) throw refused(param, `${path}.enum must be a non-empty array`);
    return withDefs({ enum: schema.enum.map((v, i) => literal(v, `${path}.enum[${i}]`, param)) });
  }
  const altKey = schema.oneOf !== undefined ? 'oneOf' : schema.anyOf !== undefined ? 'anyOf' : undefined;
  if (altKey) {
    const alts = schema[altKey];
    if (!Array.isArray(alts) || alts.length === 0) throw refused(param, `${path}.${altKey} must be a non-empty array`);
    if (schema.type !== undefined || schema.properties !== undefined || schema.items !== undefined) {
      throw refused(param, `${path}: "${altKey}" next to "type", "properties" or "items" is not supported in an answer schema`);
    }
    return withDefs({ oneOf: alts.map((alt, i) => answerSchema(alt, `${path}.${altKey}[${i}]`, param)) });
  }

  let type = schema.type;
  if (type === undefined) {
    if (schema.properties !== undefined || schema.additionalProperties !== undefined) type = 'object';
    else if (schema.items !== undefined || schema.prefixItems !== undefined) type = 'array';
    else return withDefs(ANY);
  }
  if (Array.isArray(type)) {
    if (type.length === 0) throw refused(param, `${path}.type must not be empty`);
    if (type.length > 1) {
      return withDefs({
        oneOf: type.map((t, i) => answerSchema({ ...schema, type: t as unknown, $defs: undefined, definitions: undefined }, `${path}.type[${i}]`, param)),
      });
    }
    type = type[0];
  }
  if (typeof type !== 'string') throw refused(param, `${path}.type must be a string or an array of strings`);
  if (type === 'object') return withDefs(objectSchema(schema, path, param));
  if (type === 'array') return withDefs(arraySchema(schema, path, param));
  if (!SCALARS.has(type)) throw refused(param, `${path}.type: unknown type ${JSON.stringify(type)}`);
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

function objectSchema(schema: Schema, path: string, param: string): Schema {
  const out: Schema = { type: 'object' };
  if (schema.properties !== undefined) {
    if (!isObject(schema.properties)) throw refused(param, `${path}.properties must be an object`);
    out.properties = Object.fromEntries(
      Object.entries(schema.properties).map(([key, value]) => [key, answerSchema(value, `${path}.properties.${key}`, param)]),
    );
    out.required = Object.keys(schema.properties);
  }
  const extra = schema.additionalProperties;
  if (extra === true || extra === false) out.additionalProperties = extra;
  else if (extra !== undefined) out.additionalProperties = answerSchema(extra, `${path}.additionalProperties`, param);
  const min = count(schema.minProperties);
  const max = count(schema.maxProperties);
  if (min !== undefined) out.minProperties = min;
  if (max !== undefined) out.maxProperties = max;
  return out;
}

function arraySchema(schema: Schema, path: string, param: string): Schema {
  const out: Schema = { type: 'array' };
  // Draft 4–2019 tuples (`items: [...]`) are 2020-12's `prefixItems`.
  const prefix = Array.isArray(schema.items) ? schema.items : schema.prefixItems;
  const items = Array.isArray(schema.items) ? schema.additionalItems : schema.items;
  if (prefix !== undefined) {
    if (!Array.isArray(prefix)) throw refused(param, `${path}.prefixItems must be an array`);
    out.prefixItems = prefix.map((item, i) => answerSchema(item, `${path}.prefixItems[${i}]`, param));
  }
  if (items === false) out.maxItems = Array.isArray(prefix) ? prefix.length : 0;
  else if (items !== undefined && items !== true) out.items = answerSchema(items, `${path}.items`, param);
  const min = count(schema.minItems);
  const max = count(schema.maxItems);
  if (min !== undefined) out.minItems = min;
  if (max !== undefined && out.maxItems === undefined) out.maxItems = max;
  return out;
}

function convertDefs(schema: Schema, path: string, param: string): Schema | undefined {
  const defs = schema.$defs ?? schema.definitions;
  if (defs === undefined) return undefined;
  const key = schema.$defs !== undefined ? '$defs' : 'definitions';
  if (!isObject(defs)) throw refused(param, `${path}.${key} must be an object`);
  return Object.fromEntries(Object.entries(defs).map(([name, def]) => [name, answerSchema(def, `${path}.${key}.${name}`, param)]));
}

function literal(value: unknown, path: string, param: string): string | number | boolean | null {
  if (value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) {
    return value;
  }
  throw refused(param, `${path}: only string, number, boolean and null constants are supported`);
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

function isObject(value: unknown): value is Schema {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
