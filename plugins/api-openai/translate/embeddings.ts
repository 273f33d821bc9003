/**
 * `POST /v1/embeddings`: body → {@link InferenceEmbedRequest}, and vectors → a `list` of
 * `embedding` objects, as floats or — with `encoding_format: 'base64'`, which the `openai` npm
 * client (≥ 4.91) sends by default and always decodes — the base64 of the little-endian float32
 * bytes. `input` is a string or an array of strings; token arrays are a 400 (the native contract
 * takes text), as are empty strings (OpenAI refuses them too).
 *
 * @module
 */
import type { EmbedResponse, InferenceEmbedRequest } from '../../../core/index.js';
import { asBody, invalid, optionalInt, optionalString, requiredString } from './fields.js';

/** How vectors are written. */
export type EncodingFormat = 'float' | 'base64';

/** A translated embeddings request. */
export interface EmbeddingsTranslation {
  native: InferenceEmbedRequest;
  encoding: EncodingFormat;
}

function inputs(value: unknown): string[] {
  if (value === undefined || value === null) invalid('input', "you must provide 'input'");
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list)) invalid('input', "'input' must be a string or an array of strings");
  if (list.length === 0) invalid('input', "'input' must not be an empty array");
  if (list.length > 2048) invalid('input', `'input' may hold at most 2048 items, got ${list.length}`);
  return list.map((s, i) => {
    const p = typeof value === 'string' ? 'input' : `input[${i}]`;
    if (typeof s === 'number' || Array.isArray(s)) invalid('input', 'token-array inputs are not supported: send text');
    if (typeof s !== 'string') invalid(p, `'${p}' must be a string`);
    if (s.length === 0) invalid(p, `'${p}' must not be empty`);
    return s;
  });
}

/** Translates an embeddings request body; throws a 400 with `param` on bad input. */
export function translateEmbeddingsRequest(raw: unknown): EmbeddingsTranslation {
  const body = asBody(raw);
  const model = requiredString(body, 'model');
  const input = inputs(body.input);
  const format = optionalString(body, 'encoding_format') ?? 'float';
  if (format !== 'float' && format !== 'base64') {
    invalid('encoding_format', `'encoding_format' must be float or base64; got ${JSON.stringify(format)}`);
  }
  const native: InferenceEmbedRequest = { model, input };
  const dimensions = optionalInt(body, 'dimensions', 1);
  if (dimensions !== undefined) native.dimensions = dimensions;
  return { native, encoding: format };
}

/** A vector as base64 of its little-endian float32 bytes. */
export function float32Base64(vector: readonly number[]): string {
  const buf = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) buf.writeFloatLE(vector[i]!, i * 4);
  return buf.toString('base64');
}

/** A `CreateEmbeddingResponse`. */
export interface EmbeddingList {
  object: 'list';
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** Builds the response from the engine's vectors. */
export function embeddingList(result: EmbedResponse, encoding: EncodingFormat): EmbeddingList {
  return {
    object: 'list',
    data: result.embeddings.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: encoding === 'base64' ? float32Base64(v) : v,
    })),
    model: result.model,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
