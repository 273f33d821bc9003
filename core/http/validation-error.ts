/**
 * Route-schema failures (Ajv errors, as Fastify reports them) → a 400 whose message names the
 * field in plain words (`"temperature" must be a number`, `model is required`) and whose `param`
 * is the field's path in the body (`messages[0].role`), which OpenAI's error format carries.
 *
 * Ajv stops at the first failing keyword, so the last error is the failure itself and those
 * before it come from the branches of a union (`anyOf`). Of those, a branch whose type the value
 * has is the one the client meant, and its deeper error is reported (`stop[1]` must be a string);
 * when no branch has the value's type, the union is described by its branches' types.
 *
 * A schema may replace the generated text with `errorMessage`: a string, or an object with one
 * text per Ajv keyword (`{ minLength: 'model is required' }`), for texts that clients match on.
 *
 * @module
 */
import { Errors, type AppError } from '../errors.js';

/** The part of an Ajv error this module reads (Ajv's `ErrorObject` with `verbose: true`). */
export interface SchemaError {
  instancePath: string;
  schemaPath: string;
  keyword: string;
  params: Record<string, unknown>;
  message?: string;
  parentSchema?: Record<string, unknown>;
  data?: unknown;
}

/** `/messages/0/role` → `messages[0].role`; the root is null. */
export function fieldPath(instancePath: string, child?: string): string | null {
  const parts = instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (child !== undefined) parts.push(child);
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out === '' ? p : `.${p}`;
  return out === '' ? null : out;
}

const ARTICLE: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
};

/** `["string","null"]` or `"number"` → `a string`, `a number`; several → `a string or an array`. */
function typeWords(types: unknown): string {
  const list = (Array.isArray(types) ? types : String(types).split(',')).map(String).filter((t) => t !== 'null');
  return list.map((t) => ARTICLE[t] ?? t).join(' or ');
}

/** The text after the field's name, for one Ajv error. */
function describe(e: SchemaError, branches: SchemaError[]): string {
  const p = e.params;
  switch (e.keyword) {
    case 'type':
      return `must be ${typeWords(p['type'])}`;
    case 'minimum':
    case 'exclusiveMinimum':
      return `must be ${e.keyword === 'minimum' ? 'at least' : 'greater than'} ${String(p['limit'])}`;
    case 'maximum':
    case 'exclusiveMaximum':
      return `must be ${e.keyword === 'maximum' ? 'at most' : 'less than'} ${String(p['limit'])}`;
    case 'minLength':
      return p['limit'] === 1 ? 'must not be empty' : `must be at least ${String(p['limit'])} characters long`;
    case 'maxLength':
      return `must be at most ${String(p['limit'])} characters long`;
    case 'minItems':
      return p['limit'] === 1 ? 'must not be empty' : `must hold at least ${String(p['limit'])} items`;
    case 'maxItems':
      return `may hold at most ${String(p['limit'])} items`;
    case 'enum':
      return `must be one of ${(p['allowedValues'] as unknown[])
        .filter((v) => v !== null)
        .map(String)
        .join(', ')}`;
    case 'const':
      return `must be ${JSON.stringify(p['allowedValue'])}`;
    case 'anyOf': {
      const types = branches.filter((b) => b.keyword === 'type').map((b) => b.params['type']);
      return types.length > 0 ? `must be ${typeWords(types.flat())}` : 'has an unsupported value';
    }
    default:
      return e.message ?? 'is invalid';
  }
}

/** The schema's own text for this error, if it has one. */
function customText(e: SchemaError): string | undefined {
  const m = e.parentSchema?.['errorMessage'];
  if (typeof m === 'string') return m;
  if (m && typeof m === 'object') {
    const byKeyword = (m as Record<string, unknown>)[e.keyword];
    if (typeof byKeyword === 'string') return byKeyword;
  }
  return undefined;
}

/** Picks the error to report: the failure, or inside a union the branch the value's type chose. */
function pick(errors: SchemaError[]): { error: SchemaError; branches: SchemaError[] } {
  let error = errors[errors.length - 1]!;
  let before = errors.slice(0, -1);
  while (error.keyword === 'anyOf' && customText(error) === undefined) {
    const prefix = `${error.schemaPath}/`;
    const branches = before.filter((b) => b.schemaPath.startsWith(prefix));
    const chosen = branches.filter((b) => !(b.keyword === 'type' && b.instancePath === error.instancePath));
    if (chosen.length === 0) return { error, branches };
    error = chosen[chosen.length - 1]!;
    before = chosen.slice(0, -1);
  }
  return { error, branches: before };
}

/** Maps a Fastify validation failure (`err.validation`, `err.validationContext`) to a 400. */
export function validationError(errors: readonly SchemaError[], context: string | undefined, cause: unknown): AppError {
  if (errors.length === 0) return Errors.badRequest('the request is invalid', { cause });
  const { error, branches } = pick([...errors]);
  const missing = error.keyword === 'required' ? String(error.params['missingProperty']) : undefined;
  const param = fieldPath(error.instancePath, missing);
  const custom = customText(error);
  if (custom !== undefined) return Errors.badRequest(custom, { param, cause });
  if (param === null) {
    if (context !== 'body') return Errors.badRequest(`the request ${context ?? 'input'} ${describe(error, branches)}`, { cause });
    const absent = error.data === undefined || error.data === null || error.data === '';
    return Errors.badRequest(absent ? 'missing request body' : 'the request body must be a JSON object', { cause });
  }
  const text = missing !== undefined ? `${param} is required` : `"${param}" ${describe(error, branches)}`;
  return Errors.badRequest(context === 'body' || context === undefined ? text : `${text} (in the ${context})`, { param, cause });
}
