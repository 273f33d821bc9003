/**
 * What the translators share: the 400 for a rule a route schema (schemas.ts) cannot state, the
 * fields that need normalising, and the identifiers, timestamps and envelope of OpenAI objects.
 * A 400 is an `invalid_request_error` whose `param` is the JSON path of the offending field, as
 * OpenAI does. Ids (`chatcmpl-…`, `cmpl-…`, `call_…`) carry 96 random bits each (Ollama's three
 * decimal digits collide); `created` is in Unix seconds.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { Errors } from 'lia/plugin';
import { VERSION } from 'lia/utils';

/** A parsed JSON object (one not described by a schema, such as a message). */
export type Body = Record<string, unknown>;

/** Throws a 400 about `param`. */
export function invalid(param: string, message: string): never {
  throw Errors.badRequest(message, { param });
}

/** `stop`: a string or a list of strings → a list without empty strings, or none. */
export function stopSequences(stop: string | string[] | null | undefined): string[] | undefined {
  if (stop === undefined || stop === null) return undefined;
  const out = (typeof stop === 'string' ? [stop] : stop).filter((s) => s.length > 0);
  return out.length > 0 ? out : undefined;
}

/** `n`: only 1 is served (see docs/openai.md); more is a clear 400. */
export function singleChoice(n: number | null | undefined): void {
  if (n !== undefined && n !== null && n > 1) invalid('n', `'n' > 1 is not supported: send ${n} requests instead`);
}

/** A fresh id with the given prefix (`chatcmpl-`, `cmpl-`, `call_`). */
export function newId(prefix: string): string {
  return prefix + randomBytes(12).toString('hex');
}

/** `created`: Unix seconds. */
export function unixSeconds(now = Date.now()): number {
  return Math.floor(now / 1000);
}

/** `system_fingerprint`: names the appliance build that served the request. */
export const SYSTEM_FINGERPRINT = `fp_lia_${VERSION}`;

/** What every object of one response shares: `id`, `created` and the model name. */
export interface ResponseMeta {
  id: string;
  created: number;
  model: string;
}

/** The fields every response object starts with, for one `object` type. */
export function envelope<O extends string>(meta: ResponseMeta, object: O) {
  return { id: meta.id, object, created: meta.created, model: meta.model, system_fingerprint: SYSTEM_FINGERPRINT };
}
