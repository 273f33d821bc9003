/**
 * Identifiers and timestamps of OpenAI objects: `chatcmpl-…`, `cmpl-…`, `call_…` with 96 random
 * bits each (Ollama's three decimal digits collide), and `created` in Unix seconds.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import { VERSION } from 'lia/utils';

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
