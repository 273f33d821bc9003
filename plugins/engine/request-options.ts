/**
 * Validation of the Ollama `options` object and the layering of defaults: the model's stored
 * parameters (Modelfile `PARAMETER`) under the request's options. Known keys must have the right
 * type (Ollama: a 400 such as `option "stop" must be of type array`); unknown keys are ignored,
 * because clients still send removed ones (`numa`, `penalize_newline`, `mirostat`, ...).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { KvCacheType, SamplingOptions } from './public.js';

/** The KV cache types a request, a Modelfile or the config may name. */
export const KV_CACHE_TYPES: readonly KvCacheType[] = ['f16', 'q8_0', 'q4_0'];

const INTEGER_KEYS = ['top_k', 'seed', 'num_predict', 'num_ctx', 'num_gpu', 'num_parallel', 'repeat_last_n', 'draft_num_predict', 'draft_ngram'] as const;
type BoundedKey = 'repeat_last_n' | 'num_ctx' | 'num_gpu' | 'num_parallel' | 'draft_num_predict' | 'draft_ngram';
const BOUNDED_KEYS: ReadonlySet<string> = new Set<BoundedKey>(['repeat_last_n', 'num_ctx', 'num_gpu', 'num_parallel', 'draft_num_predict', 'draft_ngram']);
const FLOAT_KEYS = ['temperature', 'top_p', 'min_p', 'repeat_penalty', 'presence_penalty', 'frequency_penalty'] as const;

/**
 * Bounds of the options that size what an engine allocates per request and slot (docs/security.md,
 * "Request bounds"): the penalty window (`repeat_last_n`: a ring of that many tokens, -1 is the
 * whole context) and the stop words the engine matches against the output. The context size
 * (`num_ctx`) is bounded by the memory budget at load instead (scheduler.ts). A request past a
 * bound is a 400 naming the option and the limit; a stored parameter past it is left out.
 */
export const OPTION_BOUNDS = {
  repeat_last_n: { min: -1, max: 131_072 },
  num_ctx: { min: 0, max: 16_777_216 },
  num_gpu: { min: -1, max: 1_000_000 },
  num_parallel: { min: 1, max: 256 },
  /** Tokens drafted per step in speculative decoding (0: off); llama-server drafts up to 16 by default. */
  draft_num_predict: { min: 0, max: 64 },
  /** The n-gram length of n-gram lookup (0: off). */
  draft_ngram: { min: 0, max: 32 },
  stopWords: 64,
  loraEntries: 64,
  stopLength: 1024,
} as const;

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
  const outside = (key: string, min: number, max: number): void => {
    if (strict) throw Errors.badRequest(`option "${key}" must be between ${min} and ${max}`, { param: `options.${key}` });
  };
  for (const key of INTEGER_KEYS) {
    const v = src[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      bad(key, 'integer');
      continue;
    }
    const n = Math.trunc(v);
    const bound = BOUNDED_KEYS.has(key) ? OPTION_BOUNDS[key as BoundedKey] : null;
    if (bound && (n < bound.min || n > bound.max)) outside(key, bound.min, bound.max);
    else out[key] = n;
  }
  for (const key of FLOAT_KEYS) {
    const v = src[key];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'number' || !Number.isFinite(v)) bad(key, 'number');
    else out[key] = v;
  }
  const kv = src['kv_cache_type'];
  if (kv !== undefined && kv !== null) {
    if (typeof kv === 'string' && (KV_CACHE_TYPES as readonly string[]).includes(kv.toLowerCase())) out.kv_cache_type = kv.toLowerCase() as KvCacheType;
    else if (strict) throw Errors.badRequest(`option "kv_cache_type" must be one of ${KV_CACHE_TYPES.join(', ')}`, { param: 'options.kv_cache_type' });
  }
  const fa = src['flash_attention'];
  if (fa !== undefined && fa !== null) {
    if (typeof fa === 'boolean') out.flash_attention = fa;
    else bad('flash_attention', 'boolean');
  }
  const draft = src['draft_model'];
  if (draft !== undefined && draft !== null) {
    if (typeof draft === 'string') out.draft_model = draft.trim();
    else bad('draft_model', 'string');
  }
  const lora = src['lora'];
  if (lora !== undefined && lora !== null) {
    const parsed = loraScales(lora);
    if (parsed) out.lora = parsed;
    else if (strict) {
      throw Errors.badRequest(
        `option "lora" must be an array of at most ${OPTION_BOUNDS.loraEntries} {id, scale} objects (id an integer from 0, scale a number)`,
        {
          param: 'options.lora',
        },
      );
    }
  }
  const stop = src['stop'];
  if (stop !== undefined && stop !== null) {
    // Stored parameters keep a single stop word as a string.
    if (!strict && typeof stop === 'string') out.stop = [stop];
    else if (!Array.isArray(stop) || stop.some((s) => typeof s !== 'string')) bad('stop', 'array');
    else if (stop.length > OPTION_BOUNDS.stopWords || (stop as string[]).some((s) => s.length > OPTION_BOUNDS.stopLength)) {
      if (strict)
        throw Errors.badRequest(`option "stop" takes at most ${OPTION_BOUNDS.stopWords} strings of at most ${OPTION_BOUNDS.stopLength} characters`, {
          param: 'options.stop',
        });
    } else out.stop = stop as string[];
  }
  return out;
}

/** llama-server's `lora` list (`[{id, scale}]`), or null when it is not one. */
export function loraScales(v: unknown): Array<{ id: number; scale: number }> | null {
  if (!Array.isArray(v) || v.length > OPTION_BOUNDS.loraEntries) return null;
  const out: Array<{ id: number; scale: number }> = [];
  for (const e of v) {
    if (typeof e !== 'object' || e === null) return null;
    const { id, scale } = e as Record<string, unknown>;
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0) return null;
    if (typeof scale !== 'number' || !Number.isFinite(scale)) return null;
    out.push({ id, scale });
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
