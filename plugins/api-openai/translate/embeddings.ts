/**
 * `POST /v1/embeddings`: body → {@link InferenceEmbedRequest}, and vectors → a `list` of
 * `embedding` objects, as floats or — with `encoding_format: 'base64'`, which the `openai` npm
 * client (≥ 4.91) sends by default and always decodes — the base64 of the little-endian float32
 * bytes. `input` is a string or an array of strings; token arrays are a 400 (the native contract
 * takes text), as are empty strings (OpenAI refuses them too).
 *
 * @module
 */
import type { EmbedResponse, InferenceEmbedRequest } from 'lia/plugin/contracts';
import { invalid } from './shared.js';
import type { EmbeddingsBody } from './schemas.js';

/** How vectors are written. */
export type EncodingFormat = 'float' | 'base64';

/** A translated embeddings request. */
export interface EmbeddingsTranslation {
  native: InferenceEmbedRequest;
  encoding: EncodingFormat;
}

/** `input` as a list of texts; token arrays and empty texts are refused. */
function inputs(value: EmbeddingsBody['input']): string[] {
  if (typeof value === 'string') return [value];
  return value.map((s, i) => {
    if (typeof s === 'number' || Array.isArray(s)) invalid('input', 'token-array inputs are not supported: send text');
    if (typeof s !== 'string') invalid(`input[${i}]`, `'input[${i}]' must be a string`);
    if (s.length === 0) invalid(`input[${i}]`, `'input[${i}]' must not be empty`);
    return s;
  });
}

/** Translates an embeddings body (checked by its route schema); throws a 400 with `param` for what the schema cannot rule. */
export function translateEmbeddingsRequest(body: EmbeddingsBody): EmbeddingsTranslation {
  const native: InferenceEmbedRequest = { model: body.model, input: inputs(body.input) };
  if (body.dimensions != null) native.dimensions = body.dimensions;
  return { native, encoding: body.encoding_format ?? 'float' };
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
