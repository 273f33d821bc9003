/**
 * Validation of the Ollama `options` object and the layering of defaults: the model's stored
 * parameters (Modelfile `PARAMETER`) under the request's options. Known keys must have the right
 * type (Ollama: a 400 such as `option "stop" must be of type array`); unknown keys are ignored,
 * because clients still send removed ones (`numa`, `penalize_newline`, `mirostat`, ...).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { SamplingOptions } from 'lia/plugin/contracts';

const INTEGER_KEYS = ['top_k', 'seed', 'num_predict', 'num_ctx', 'repeat_last_n'] as const;
const FLOAT_KEYS = ['temperature', 'top_p', 'min_p', 'repeat_penalty', 'presence_penalty', 'frequency_penalty'] as const;

/**
 * Reads the sampling options from `raw`. With `strict` (request bodies) a wrong type is a 400;
 * without it (stored parameters) a bad value is skipped.
 */
export function parseSamplingOptions(raw: unknown, strict = true): SamplingOptions {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) {
    if (!strict) return {};
    throw Errors.badRequest('"options" must be an object', { param: 'options' });
  }
  const src = raw as Record<string, unknown>;
  const out: SamplingOptions = {};
  const bad = (key: string, type: string): void => {
    if (strict) throw Errors.badRequest(`option "${key}" must be of type ${type}`, { param: `options.${key}` });
  };
  for (const key of INTEGER_KEYS) {
    const v = src[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) bad(key, 'integer');
    else out[key] = Math.trunc(v);
  }
  for (const key of FLOAT_KEYS) {
    const v = src[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) bad(key, 'number');
    else out[key] = v;
  }
  const stop = src['stop'];
  if (stop !== undefined && stop !== null) {
    // Stored parameters keep a single stop word as a string.
    if (!strict && typeof stop === 'string') out.stop = [stop];
    else if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string')) bad('stop', 'array');
    else out.stop = stop as string[];
  }
  return out;
}

/** The model's stored parameters, overridden key by key by the request's options. */
export function mergeOptions(stored: Record<string, unknown>, request: SamplingOptions | undefined): SamplingOptions {
  return { ...parseSamplingOptions(stored, false), ...stripUndefined(request ?? {}) };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
