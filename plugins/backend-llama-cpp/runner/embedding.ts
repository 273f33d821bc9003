/**
 * Embeddings from a generation model: a separate embedding context, created on the first request
 * (with the generation context's length and the runner's threads) and kept while the model is
 * loaded.
 *
 * @module
 */
import type { LlamaEmbeddingContext, LlamaModel, Token } from 'node-llama-cpp';
import type { EmbedParams, EmbedResult } from 'lia/engine';
import { shapeEmbedding } from 'lia/gguf';
import { RequestError } from './errors.js';

export class Embedder {
  #context: Promise<LlamaEmbeddingContext> | null = null;

  constructor(
    readonly model: LlamaModel,
    readonly contextLength: number,
    readonly threads: number,
  ) {}

  /**
   * Embeds the inputs one at a time (the context serialises them anyway). An input longer than
   * the context is cut when `truncate` is set (Ollama's default), else a 400.
   */
  async embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    const ctx = await this.#get();
    const overhead = ctx.calculateInputLength([]);
    const limit = ctx.model.trainContextSize > 0 ? Math.min(this.contextLength, ctx.model.trainContextSize) - overhead - 1 : 0;
    const embeddings: number[][] = [];
    let promptTokens = 0;
    for (const input of params.inputs) {
      if (signal.aborted) throw signal.reason;
      let tokens = this.model.tokenize(input);
      if (tokens.length > limit) {
        if (!params.truncate) throw new RequestError('the input length exceeds the context length');
        tokens = tokens.slice(0, limit);
      }
      if (tokens.length === 0) tokens = [(this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null) ?? (0 as Token)];
      promptTokens += tokens.length + overhead;
      const { vector } = await ctx.getEmbeddingFor(tokens);
      embeddings.push(shapeEmbedding(vector, params.dimensions, params.normalize ?? true));
    }
    return { embeddings, promptTokens };
  }

  async dispose(): Promise<void> {
    const ctx = await this.#context?.catch(() => null);
    await ctx?.dispose();
  }

  #get(): Promise<LlamaEmbeddingContext> {
    this.#context ??= this.model
      .createEmbeddingContext({ contextSize: this.contextLength, batchSize: this.contextLength, threads: this.threads })
      .catch((err: unknown) => {
        this.#context = null;
        throw err;
      });
    return this.#context;
  }
}
