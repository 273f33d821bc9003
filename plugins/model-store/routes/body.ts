/**
 * Request-body readers for the model routes: each returns a typed field or throws a 400 that
 * names the field and what was expected, so a wrong type never reaches the store.
 *
 * @module
 */
import { Errors } from 'lia/plugin';

/** A JSON object body; an absent body is Ollama's `missing request body`. */
export function objectBody(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null || body === '') throw Errors.badRequest('missing request body');
  if (typeof body !== 'object' || Array.isArray(body)) throw Errors.badRequest('the request body must be a JSON object');
  return body as Record<string, unknown>;
}

function typeName(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
}

/** An optional string field; `""` counts as absent (Go clients always send every field). */
export function optString(body: Record<string, unknown>, key: string): string | undefined {
  const v = body[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') throw Errors.badRequest(`"${key}" must be a string, not ${typeName(v)}`, { param: key });
  return v;
}

/** An optional boolean field. */
export function optBool(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw Errors.badRequest(`"${key}" must be a boolean, not ${typeName(v)}`, { param: key });
  return v;
}

/** An optional JSON object field. */
export function optObject(body: Record<string, unknown>, key: string): Record<string, unknown> | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw Errors.badRequest(`"${key}" must be an object, not ${typeName(v)}`, { param: key });
  return v as Record<string, unknown>;
}

/** The model name of show/delete/pull/push/create: `model`, else the older `name`. */
export function modelField(body: Record<string, unknown>): string {
  const name = optString(body, 'model') ?? optString(body, 'name');
  if (name === undefined) throw Errors.badRequest('model is required', { param: 'model' });
  return name;
}

/** `stream` defaults to true on Ollama's streaming routes. */
export function wantsStream(body: Record<string, unknown>): boolean {
  return optBool(body, 'stream') ?? true;
}
