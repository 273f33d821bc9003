/**
 * llama-server's `/tokenize` and `/detokenize` on an ONNX model's tokenizer (tokenizer.json, run
 * by transformers.js): ids with or without the special tokens the tokenizer puts around a text
 * ([CLS] and [SEP] for BERT), each token's vocabulary entry as its piece (`##ing` for a
 * WordPiece continuation), and ids back to text with special tokens kept.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { TokenizeParams, TokenizeResult } from 'lia/engine';
import type { Transformers } from './runtime.js';

export type Tokenizer = Awaited<ReturnType<Transformers['AutoTokenizer']['from_pretrained']>>;

/** Token texts by id, built on the first request that wants pieces. */
const pieceTables = new WeakMap<Tokenizer, string[]>();

/**
 * The tokenizer on `content`. Special-token text in it (`[SEP]`) is always read as the special
 * token: tokenizer.json's added tokens are matched before the model runs, so `parseSpecial`
 * false is not honoured here (documented in docs/rerank.md).
 */
export function tokenizeText(tokenizer: Tokenizer, params: TokenizeParams): TokenizeResult {
  const tokens = tokenizer.encode(params.content, { add_special_tokens: params.addSpecial });
  if (!params.withPieces) return { tokens };
  const table = piecesOf(tokenizer);
  return { tokens, pieces: tokens.map((id) => table[id] ?? '') };
}

/** Ids back to text; an id the vocabulary lacks is a 400. */
export function detokenizeIds(tokenizer: Tokenizer, ids: number[]): string {
  const size = piecesOf(tokenizer).length;
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= size);
  if (bad !== undefined) throw Errors.badRequest(`${bad} is not a token of this model (its vocabulary has ${size} tokens)`, { param: 'tokens' });
  return tokenizer.decode(ids, { skip_special_tokens: false });
}

function piecesOf(tokenizer: Tokenizer): string[] {
  let table = pieceTables.get(tokenizer);
  if (!table) {
    table = [];
    for (const [text, id] of tokenizer.get_vocab()) table[id] = text;
    pieceTables.set(tokenizer, table);
  }
  return table;
}
