/**
 * Reranking with a GGUF reranker (a cross-encoder whose pooling type is RANK: a BERT or XLM-R
 * encoder with a classification head, or a Qwen3-style reranker): node-llama-cpp's ranking
 * context, created on the first request (the runner's context length and threads) and kept while
 * the model is loaded. It evaluates each query and document pair as the model's rerank template
 * (or `[BOS] query [EOS/SEP] document`) lays it out and gives the sigmoid of the head's logit.
 *
 * @module
 */
import type { LlamaModel, LlamaRankingContext, Token } from 'node-llama-cpp';
import type { RankParams, RankResult } from 'lia/engine';
import { RequestError } from './errors.js';

export class Ranker {
  #context: Promise<LlamaRankingContext> | null = null;

  constructor(
    readonly model: LlamaModel,
    readonly contextLength: number,
    readonly threads: number,
  ) {}

  /**
   * Scores every document against the query. A pair longer than the context has its document cut
   * to fit when `truncate` is set (the query is kept whole), else it is a 400; a query that leaves
   * no room for any document is a 400 either way.
   */
  async rank(params: RankParams, signal: AbortSignal): Promise<RankResult> {
    if (!this.model.fileInsights.supportsRanking) throw new RequestError('this model has no ranking head (cls.output tensor)');
    const ctx = await this.#get();
    signal.throwIfAborted();
    const limit = ctx.contextSize - 1;
    const query = this.#tokens(params.query);
    if (ctx.calculateInputLength(query, []) >= limit) throw new RequestError(`the query is longer than the context (${limit} tokens)`);
    let promptTokens = 0;
    const documents = params.documents.map((text, i) => {
      let doc = this.#tokens(text);
      const length = ctx.calculateInputLength(query, doc);
      if (length > limit) {
        if (!params.truncate) throw new RequestError(`documents[${i}] and the query take ${length} tokens, more than the context's ${limit}`);
        doc = doc.slice(0, Math.max(0, doc.length - (length - limit)));
      }
      promptTokens += ctx.calculateInputLength(query, doc);
      return doc;
    });
    const scores = await ctx.rankAll(query, documents);
    signal.throwIfAborted();
    return { scores, promptTokens };
  }

  async dispose(): Promise<void> {
    const ctx = await this.#context?.catch(() => null);
    await ctx?.dispose();
  }

  #tokens(text: string): Token[] {
    return this.model.tokenize(text, false, 'trimLeadingSpace');
  }

  #get(): Promise<LlamaRankingContext> {
    const size = this.model.trainContextSize > 0 ? Math.min(this.contextLength, this.model.trainContextSize) : this.contextLength;
    // An encoder sees a whole pair in one batch, so the batch is as large as the context.
    this.#context ??= this.model.createRankingContext({ contextSize: size, batchSize: size, threads: this.threads }).catch((err: unknown) => {
      this.#context = null;
      throw err;
    });
    return this.#context;
  }
}
