/**
 * Whether one GGUF model can draft for another in speculative decoding: a draft proposes token
 * ids, which the model checks as its own, so both must mean the same text by every id. The rule is
 * llama.cpp's own (`common_speculative_are_compatible`, which llama-server applies when it loads
 * a draft, and which node-llama-cpp's draft predictor relies on without checking): the same
 * tokenizer model, the same BOS and EOS where they are added, token counts at most 128 apart
 * (padding of the embedding table), and the same text for every token id from 5 up to the
 * smaller count. Checked before anything is written or loaded, so a mismatch is a 400 naming both
 * models instead of an engine that refuses to start or drafts garbage.
 *
 * @module
 */
import { readGgufHeader } from './header.js';

/** Token counts may differ by this much (llama.cpp's `SPEC_VOCAB_MAX_SIZE_DIFFERENCE`). */
const MAX_SIZE_DIFFERENCE = 128;
/** Token ids below this are not compared (llama.cpp's `SPEC_VOCAB_CHECK_START_TOKEN_ID`: control tokens). */
const FIRST_COMPARED = 5;
/** The largest vocabulary read in full (a 256k-token model's list fits the header reader's limits). */
const MAX_TOKENS = 400_000;

interface Vocabulary {
  model: unknown;
  tokens: readonly string[];
  bos: { id: unknown; added: unknown };
  eos: { id: unknown; added: unknown };
}

async function readVocabulary(path: string): Promise<Vocabulary> {
  const { metadata } = await readGgufHeader(path, {
    maxArrayLength: MAX_TOKENS,
    ignoreKeys: ['tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores', 'tokenizer.chat_template'],
  });
  const tokens = metadata.get('tokenizer.ggml.tokens');
  return {
    model: metadata.get('tokenizer.ggml.model'),
    tokens: Array.isArray(tokens) ? (tokens as string[]) : [],
    bos: { id: metadata.get('tokenizer.ggml.bos_token_id'), added: metadata.get('tokenizer.ggml.add_bos_token') },
    eos: { id: metadata.get('tokenizer.ggml.eos_token_id'), added: metadata.get('tokenizer.ggml.add_eos_token') },
  };
}

/**
 * Null when the GGUF at `draft` can draft for the one at `target`; else what differs (for the
 * 400, e.g. `the tokenizer models are llama and gpt2`, `32000 tokens against 512`).
 */
export async function vocabularyDifference(target: string, draft: string): Promise<string | null> {
  const [t, d] = await Promise.all([readVocabulary(target), readVocabulary(draft)]);
  if (t.model !== d.model) return `the tokenizer models are ${String(t.model)} and ${String(d.model)}`;
  if (t.tokens.length === 0 || d.tokens.length === 0) return 'a model lists no tokens';
  if (Math.abs(t.tokens.length - d.tokens.length) > MAX_SIZE_DIFFERENCE) return `${t.tokens.length} tokens against ${d.tokens.length}`;
  for (const [name, a, b] of [
    ['BOS', t.bos, d.bos],
    ['EOS', t.eos, d.eos],
  ] as const) {
    if (a.added !== b.added || (a.added === true && a.id !== b.id)) return `their ${name} tokens differ`;
  }
  const n = Math.min(t.tokens.length, d.tokens.length);
  for (let i = FIRST_COMPARED; i < n; i++) {
    if (t.tokens[i] !== d.tokens[i]) return `token ${i} is ${JSON.stringify(t.tokens[i])} against ${JSON.stringify(d.tokens[i])}`;
  }
  return null;
}
