/**
 * Readers for the fields of an OpenAI request body. Each one accepts what the OpenAI API accepts
 * (including `null` for "not set"), returns a typed value, and otherwise throws a 400
 * `invalid_request_error` whose `param` is the JSON path of the offending field, as OpenAI does.
 * Fields nobody reads are never looked at, so unknown or new fields are ignored.
 *
 * @module
 */
import { Errors } from '../../../core/index.js';

/** A parsed JSON object whose fields are read one by one. */
export type Body = Record<string, unknown>;

/** Throws a 400 about `param`. */
export function invalid(param: string, message: string): never {
  throw Errors.badRequest(message, { param });
}

/** The request body as an object, or a 400. */
export function asBody(value: unknown): Body {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw Errors.badRequest('the request body must be a JSON object');
  }
  return value as Body;
}

/** True when the field is absent or `null` (OpenAI's "not set"). */
export function unset(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

/** A required, non-empty string. */
export function requiredString(body: Body, key: string, param = key): string {
  const v = body[key];
  if (unset(v)) invalid(param, `you must provide '${param}'`);
  if (typeof v !== 'string') invalid(param, `'${param}' must be a string`);
  if (v.length === 0) invalid(param, `'${param}' must not be empty`);
  return v;
}

/** An optional string. */
export function optionalString(body: Body, key: string, param = key): string | undefined {
  const v = body[key];
  if (unset(v)) return undefined;
  if (typeof v !== 'string') invalid(param, `'${param}' must be a string`);
  return v;
}

/** An optional boolean. */
export function optionalBool(body: Body, key: string, param = key): boolean | undefined {
  const v = body[key];
  if (unset(v)) return undefined;
  if (typeof v !== 'boolean') invalid(param, `'${param}' must be a boolean`);
  return v;
}

/** An optional number within `[min, max]`. */
export function optionalNumber(body: Body, key: string, min: number, max: number, param = key): number | undefined {
  const v = body[key];
  if (unset(v)) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) invalid(param, `'${param}' must be a number`);
  if (v < min || v > max) invalid(param, `'${param}' must be between ${min} and ${max}, got ${v}`);
  return v;
}

/** An optional integer within `[min, max]`. */
export function optionalInt(body: Body, key: string, min: number, max = Number.MAX_SAFE_INTEGER, param = key): number | undefined {
  const v = body[key];
  if (unset(v)) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v)) invalid(param, `'${param}' must be an integer`);
  if (v < min || v > max) invalid(param, `'${param}' must be ${max === Number.MAX_SAFE_INTEGER ? `at least ${min}` : `between ${min} and ${max}`}, got ${v}`);
  return v;
}

/** An optional object (not an array). */
export function optionalObject(body: Body, key: string, param = key): Body | undefined {
  const v = body[key];
  if (unset(v)) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) invalid(param, `'${param}' must be an object`);
  return v as Body;
}

/** `stop`: a string or an array of strings, normalised to an array (empty strings dropped). */
export function stopSequences(body: Body): string[] | undefined {
  const v = body.stop;
  if (unset(v)) return undefined;
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list)) invalid('stop', "'stop' must be a string or an array of strings");
  list.forEach((s, i) => {
    if (typeof s !== 'string') invalid(`stop[${i}]`, `'stop[${i}]' must be a string`);
  });
  const out = (list as string[]).filter((s) => s.length > 0);
  return out.length > 0 ? out : undefined;
}

/** `n`: only 1 is served (see docs/openai.md); anything else is a clear 400. */
export function singleChoice(body: Body): void {
  const n = optionalInt(body, 'n', 1, 128);
  if (n !== undefined && n > 1) invalid('n', `'n' > 1 is not supported: send ${n} requests instead`);
}
