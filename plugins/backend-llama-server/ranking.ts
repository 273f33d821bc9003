/**
 * Ranking and tokenizing on a running llama-server. A reranker's server runs with `--rerank`
 * (embeddings with pooling type RANK), and {@link ServerRanker.rank} sends the query and every
 * document in one `/v1/rerank` request, which the server evaluates as one task per pair, batched
 * across its slots. Its answer (sorted, raw scores) is mapped back to the contract: one score per
 * document in document order, the sigmoid of the head's logit (node-llama-cpp's scale), except for
 * architectures whose rank head already ends in a softmax in llama.cpp (Qwen3 rerankers).
 *
 * llama-server refuses a pair longer than its context or batch rather than cutting it, so
 * documents that may not fit are measured with `/tokenize` and cut here (the query kept whole),
 * as node-llama-cpp's ranker does; documents whose bytes alone prove they fit are sent as they are.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { RankParams, RankResult, TokenizeParams, TokenizeResult } from 'lia/engine';
import type { LlamaServer } from './server.js';

/** Architectures whose rank output llama.cpp already normalises (`build_pooling` ends in a softmax). */
const NORMALISED = new Set(['qwen3', 'qwen3vl']);

/**
 * Tokens kept free beside a pair's measured length: the pair is tokenized as one text by the server
 * (with its rerank template, if any), which can merge differently at the seams than its parts.
 */
const SLACK = 4;

/** `/v1/rerank`'s answer (Jina's shape). */
interface RerankAnswer {
  results?: Array<{ index?: number; relevance_score?: number }>;
  usage?: { prompt_tokens?: number };
}

/** `/tokenize`'s answer: ids, or `{id, piece}` with `with_pieces` (a piece that is not UTF-8 comes as its bytes). */
interface TokenizeAnswer {
  tokens?: Array<number | { id: number; piece: string | number[] }>;
}

export class ServerRanker {
  #overhead: Promise<number> | null = null;

  /**
   * @param family the model's architecture (`general.architecture`, the store's `details.family`)
   * @param limit the most tokens of one pair: the server's context per slot or its batch, whichever is smaller
   */
  constructor(
    readonly server: LlamaServer,
    readonly family: string | undefined,
    readonly limit: number,
  ) {}

  /** Scores every document against the query in one request to the server. */
  async rank(p: RankParams, signal: AbortSignal): Promise<RankResult> {
    const documents = await this.#fit(p, signal);
    const answer = (await this.server.fetchJson('POST', '/v1/rerank', { query: p.query, documents, top_n: documents.length }, signal)) as RerankAnswer;
    const normalised = NORMALISED.has(this.family ?? '');
    const scores = new Array<number>(documents.length).fill(Number.NaN);
    for (const r of answer.results ?? []) {
      if (typeof r.index !== 'number' || typeof r.relevance_score !== 'number' || !(r.index in scores)) continue;
      scores[r.index] = normalised ? r.relevance_score : 1 / (1 + Math.exp(-r.relevance_score));
    }
    if (scores.some(Number.isNaN)) throw Errors.engineFailed('llama-server did not score every document');
    return { scores, promptTokens: answer.usage?.prompt_tokens ?? 0 };
  }

  /** The documents as sent: each one that would not fit beside the query cut to fit (or a 400 without `truncate`). */
  async #fit(p: RankParams, signal: AbortSignal): Promise<string[]> {
    const overhead = await this.#pairOverhead(signal);
    // A token of plain text covers at least one byte, so a pair of few enough bytes fits unmeasured.
    const room = this.limit - overhead - SLACK - Buffer.byteLength(p.query);
    const long = p.documents.flatMap((d, i) => (Buffer.byteLength(d) > room ? [i] : []));
    if (long.length === 0) return p.documents;
    const query = (await this.#tokens(p.query, signal)).length;
    const max = this.limit - overhead - SLACK - query;
    if (max <= 0) throw Errors.badRequest(`the query is longer than the context (${this.limit} tokens)`);
    const documents = [...p.documents];
    await Promise.all(
      long.map(async (i) => {
        let text = documents[i]!;
        for (let round = 0; ; round++) {
          const tokens = await this.#tokens(text, signal);
          if (tokens.length <= max) break;
          if (!p.truncate) {
            throw Errors.badRequest(`documents[${i}] and the query take ${query + overhead + tokens.length} tokens, more than the context's ${this.limit}`);
          }
          // Text back from the cut ids may tokenize a little longer: measured again, cut again.
          const cut = tokens.slice(0, Math.max(0, max - round * SLACK));
          text = cut.length === 0 ? '' : await detokenize(this.server, cut, signal, false);
          if (round === 3) break;
        }
        documents[i] = text;
      }),
    );
    return documents;
  }

  /**
   * Tokens a pair holds beyond its query's and document's own (BOS, SEP, EOS, a rerank template),
   * measured once per server: a pair of one-token texts ranked, less those two tokens.
   */
  #pairOverhead(signal: AbortSignal): Promise<number> {
    this.#overhead ??= (async () => {
      const [answer, one] = await Promise.all([
        this.server.fetchJson('POST', '/v1/rerank', { query: 'a', documents: ['a'] }, signal) as Promise<RerankAnswer>,
        this.#tokens('a', signal),
      ]);
      return Math.max(0, (answer.usage?.prompt_tokens ?? 0) - 2 * one.length);
    })().catch((err: unknown) => {
      this.#overhead = null;
      throw err;
    });
    return this.#overhead;
  }

  async #tokens(text: string, signal: AbortSignal): Promise<number[]> {
    return (await tokenize(this.server, { content: text, addSpecial: false, parseSpecial: false, withPieces: false }, signal)).tokens;
  }
}

/** llama-server's `/tokenize` on the loaded model; a piece that is not whole UTF-8 reads as U+FFFD. */
export async function tokenize(server: LlamaServer, p: TokenizeParams, signal: AbortSignal): Promise<TokenizeResult> {
  const answer = (await server.fetchJson(
    'POST',
    '/tokenize',
    { content: p.content, add_special: p.addSpecial, parse_special: p.parseSpecial, with_pieces: p.withPieces },
    signal,
  )) as TokenizeAnswer;
  const tokens = answer.tokens ?? [];
  if (!p.withPieces) return { tokens: tokens.map((t) => (typeof t === 'number' ? t : t.id)) };
  const entries = tokens.map((t) => (typeof t === 'number' ? { id: t, piece: '' } : t));
  return {
    tokens: entries.map((t) => t.id),
    pieces: entries.map((t) => (typeof t.piece === 'string' ? t.piece : Buffer.from(t.piece).toString('utf8'))),
  };
}

/**
 * A 400 naming the first id that is not a token of the server's model (llama.cpp would fail on
 * it); `param` is the request field the ids came in.
 */
export function checkTokenIds(server: LlamaServer, ids: readonly number[], param: 'tokens' | 'context'): void {
  const n = server.vocabulary;
  const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || (n > 0 && id >= n));
  if (bad === undefined) return;
  // The words node-llama-cpp's runner uses for each field.
  if (param === 'context') throw Errors.badRequest(`context holds ${bad}, which is not a token of this model`, { param });
  throw Errors.badRequest(`${bad} is not a token of this model (its vocabulary has ${n} tokens)`, { param });
}

/**
 * llama-server's `/detokenize`: ids back to text, special tokens written out. An id outside the
 * vocabulary is a 400 ({@link checkTokenIds}); `check` false skips that for ids the server gave.
 */
export async function detokenize(server: LlamaServer, ids: number[], signal: AbortSignal, check = true): Promise<string> {
  if (check) checkTokenIds(server, ids, 'tokens');
  const answer = (await server.fetchJson('POST', '/detokenize', { tokens: ids }, signal)) as { content?: string };
  return answer.content ?? '';
}
