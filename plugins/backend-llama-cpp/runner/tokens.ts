/**
 * llama-server's `/tokenize` and `/detokenize` on the loaded model's own tokenizer: ids as
 * llama.cpp's `llama_tokenize` gives them (special tokens around the text with `addSpecial`, as
 * the vocabulary type adds them), pieces as each token's text (a token that is part of a
 * multi-byte character reads as U+FFFD), and ids back to text with special tokens written out. An id outside the vocabulary is a 400 (llama.cpp would abort on it).
 *
 * @module
 */
import { LlamaVocabularyType, type LlamaModel, type Token } from 'node-llama-cpp';
import type { TokenizeParams, TokenizeResult } from 'lia/engine';
import { RequestError } from './errors.js';

export function tokenize(model: LlamaModel, params: TokenizeParams): TokenizeResult {
  const tokens: Token[] = [...model.tokenize(params.content, params.parseSpecial)];
  if (params.addSpecial) {
    const { first, last } = specialAround(model);
    if (first != null) tokens.unshift(first);
    if (last != null) tokens.push(last);
  }
  return params.withPieces ? { tokens, pieces: tokens.map((t) => piece(model, t)) } : { tokens };
}

/**
 * A token's text as llama.cpp's `token_to_piece` gives it: with its leading space (`▁He` is
 * ` He`), which detokenizing the token alone would drop as the start of a text. Detokenized
 * after a copy of itself, the space stays.
 */
function piece(model: LlamaModel, token: Token): string {
  return model.detokenize([token], true, [token]);
}

export function detokenize(model: LlamaModel, ids: number[]): string {
  const size = vocabularySize(model);
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || size === 0 || id >= size);
  if (bad !== undefined) throw new RequestError(`${bad} is not a token of this model (its vocabulary has ${size} tokens)`);
  return model.detokenize(ids as Token[], true);
}

/**
 * The tokens `llama_tokenize` puts around a text when asked to add special tokens: WordPiece
 * (BERT) vocabularies add [CLS] and [SEP]; Unigram (T5) ones EOS only; the others BOS and EOS as
 * the model's `add_bos_token` and `add_eos_token` say.
 */
function specialAround(model: LlamaModel): { first: Token | null; last: Token | null } {
  const t = model.tokens;
  switch (model.vocabularyType) {
    case LlamaVocabularyType.wpm:
      return { first: t.bos, last: t.sep };
    case LlamaVocabularyType.ugm:
      return { first: null, last: t.eos };
    case LlamaVocabularyType.rwkv:
      return { first: null, last: null };
    default:
      return { first: t.shouldPrependBosToken ? t.bos : null, last: t.shouldAppendEosToken ? t.eos : null };
  }
}

/** Tokens in the vocabulary, from the GGUF header (0 when the header does not list them). */
function vocabularySize(model: LlamaModel): number {
  const list = (model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
  return Array.isArray(list) ? list.length : 0;
}
