/**
 * A loaded ONNX cross-encoder (a reranker: `BertForSequenceClassification` and the like) behind
 * the {@link LoadedModel} contract: `rank` tokenises each query and document pair as the model
 * was trained on it (`[CLS] query [SEP] document [SEP]`, token types 0 then 1), runs the pairs
 * through the network in as few forward passes as the token budget allows (batching.ts), and
 * reads each pair's logits as a relevance probability (head.ts). It also tokenises (tokens.ts);
 * it does not generate or embed. Forward passes run one at a time; `unload` waits for the one in
 * flight.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import type { RankParams, RankResult } from 'lia/engine';
import { padPass, planPasses, type Encoding } from './batching.js';
import { relevance } from './head.js';
import type { OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { transformers, type Transformers } from './runtime.js';
import { FOLDER_ONLY, loadFolder, networkOptions, OnnxModel } from './onnx-model.js';
import type { Tokenizer } from './tokens.js';

type Network = Awaited<ReturnType<Transformers['AutoModelForSequenceClassification']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;

/** Loads the tokenizer and the classifier network of `model` from its folder. */
export async function loadCrossEncoder(model: ResolvedModel, layout: OnnxLayout, labels: number, settings: EncoderSettings): Promise<LoadedModel> {
  if (labels !== 1 && labels !== 2) {
    throw Errors.engineFailed(`model "${model.name}" is a classifier with ${labels} labels; a reranker has 1 (a relevance logit) or 2`);
  }
  const t = await transformers();
  return loadFolder(model, layout, async () => {
    const tokenizer = await t.AutoTokenizer.from_pretrained(layout.dir, FOLDER_ONLY);
    const network = await t.AutoModelForSequenceClassification.from_pretrained(layout.dir, networkOptions(layout, settings));
    return new CrossEncoderModel(t, model.name, layout, labels, tokenizer, network, settings);
  });
}

class CrossEncoderModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['rerank'];

  constructor(
    private readonly t: Transformers,
    name: string,
    layout: OnnxLayout,
    private readonly labels: number,
    tokenizer: Tokenizer,
    private readonly network: Network,
    settings: EncoderSettings,
  ) {
    super(name, layout, tokenizer, network, settings);
  }

  async rank(params: RankParams, signal: AbortSignal): Promise<RankResult> {
    this.checkLoaded();
    signal.throwIfAborted();
    const encodings = this.#pairs(params.query, params.documents, params.truncate);
    const lengths = encodings.map((e) => e['input_ids']!.length);
    const scores = new Array<number>(encodings.length);
    for (const indices of planPasses(lengths, this.settings.maxBatchTokens)) {
      signal.throwIfAborted();
      const pass = padPass(encodings, indices, this.tokenizer.pad_token_id ?? 0, this.paddingSide());
      const feeds: Record<string, Tensor> = {};
      for (const [key, { data, dims }] of Object.entries(pass.tensors)) feeds[key] = new this.t.Tensor('int64', data, dims);
      const logits = await this.exclusive(() => this.#forward(feeds));
      indices.forEach((i, k) => (scores[i] = relevance(logits.subarray(k * this.labels, (k + 1) * this.labels))));
    }
    return { scores, promptTokens: lengths.reduce((a, b) => a + b, 0) };
  }

  /**
   * One encoding per document, paired with the query. Over the model's token limit, `truncate`
   * cuts the longer of the two first (the tokenizer's `longest_first`); without it, a 400.
   */
  #pairs(query: string, documents: string[], truncate: boolean): Encoding[] {
    const max = this.layout.shape.maxTokens;
    const columns = this.tokenizer(new Array<string>(documents.length).fill(query), {
      text_pair: documents,
      padding: false,
      truncation: truncate,
      max_length: max,
      return_tensor: false,
    }) as unknown as Record<string, number[][]>;
    const keys = Object.keys(columns);
    const rows = documents.map((_, i) => Object.fromEntries(keys.map((k) => [k, columns[k]![i]!])) as Encoding);
    const long = rows.findIndex((r) => r['input_ids']!.length > max);
    if (long >= 0) throw Errors.badRequest(`documents[${long}] and the query take ${rows[long]!['input_ids']!.length} tokens, more than the model's ${max}`);
    return rows;
  }

  /** One forward pass; the logits as float32 `[pairs × labels]`. */
  async #forward(feeds: Record<string, Tensor>): Promise<Float32Array> {
    let logits: Tensor | undefined;
    try {
      logits = ((await this.network(feeds)) as Record<string, Tensor | undefined>)['logits'];
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${(err instanceof Error ? err.message : String(err)).split('\n')[0]}`, { cause: err });
    }
    if (!logits || logits.dims.length !== 2 || logits.dims[1] !== this.labels) {
      throw Errors.engineFailed(`model "${this.name}" does not output logits of ${this.labels} label(s) per pair`);
    }
    return (logits.type === 'float32' ? logits : logits.to('float32')).data as Float32Array;
  }
}
