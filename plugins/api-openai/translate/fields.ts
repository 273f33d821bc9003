/**
 * What the translators share once a body has passed its route schema (schemas.ts): the 400 for
 * a rule the schema cannot state, and the fields that need normalising. A 400 is an
 * `invalid_request_error` whose `param` is the JSON path of the offending field, as OpenAI does.
 *
 * @module
 */
import { Errors } from 'lia/plugin';

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
