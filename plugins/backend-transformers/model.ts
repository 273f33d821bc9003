/**
 * A loaded ONNX sentence encoder: the transformers.js tokenizer and an onnxruntime session
 * (through `AutoModel`), behind the {@link LoadedModel} contract.
 *
 * `embed` tokenises every input once, cuts or rejects what is over the model's token limit,
 * runs the inputs through the network in as few forward passes as the token budget allows
 * (normally one per request), mean-pools the token vectors over the attention mask (or pools as
 * the folder's sentence-transformers config says) and L2-normalises them (unless asked not to,
 * for the legacy `/api/embeddings`): what the `feature-extraction` pipeline does with
 * `{pooling: 'mean', normalize: true}`, with the counting and truncation control the APIs need.
 * Forward passes of one model run one at a time; `unload` waits for the one in flight.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { EmbedParams, EmbedResult } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import { padPass, planPasses, type Encoding } from './batching.js';
import type { OnnxLayout } from './layout.js';
import { finish, pool } from './pooling.js';
import { transformers, type Transformers } from './runtime.js';
import { describeError, FOLDER_ONLY, loadFolder, networkOptions, OnnxModel } from './onnx-model.js';
import type { Tokenizer } from './tokens.js';

/** How a model is run. */
export interface EncoderSettings {
  /** onnxruntime intra-op threads. */
  threads: number;
  /** Most padded tokens in one forward pass. */
  maxBatchTokens: number;
  /** Keep onnxruntime's CPU memory arena (faster passes; the largest pass's memory stays held). */
  memoryArena: boolean;
  /** Bytes reported as held (see `memory.ts`). */
  sizeBytes: number;
}

type Network = Awaited<ReturnType<Transformers['AutoModel']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;

/** Loads the tokenizer and the network of `model` from its folder. */
export async function loadEncoder(model: ResolvedModel, layout: OnnxLayout, settings: EncoderSettings): Promise<LoadedModel> {
  const t = await transformers();
  return loadFolder(model, layout, async () => {
    const config = await t.AutoConfig.from_pretrained(layout.dir, FOLDER_ONLY);
    const tokenizer = await t.AutoTokenizer.from_pretrained(layout.dir, FOLDER_ONLY);
    const network = await t.AutoModel.from_pretrained(layout.dir, { ...networkOptions(layout, settings), config });
    return new EncoderModel(t, model.name, layout, tokenizer, network, settings);
  });
}

class EncoderModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['embedding'];

  constructor(
    private readonly t: Transformers,
    name: string,
    layout: OnnxLayout,
    tokenizer: Tokenizer,
    private readonly network: Network,
    settings: EncoderSettings,
  ) {
    super(name, layout, tokenizer, network, settings);
  }

  override async embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    this.checkLoaded();
    signal.throwIfAborted();
    if (params.inputs.length === 0) return { embeddings: [], promptTokens: 0 };
    const encodings = this.#tokenize(params.inputs, params.truncate);
    const lengths = encodings.map((e) => e['input_ids']!.length);
    const embeddings: number[][] = new Array<number[]>(encodings.length);
    for (const indices of planPasses(lengths, this.settings.maxBatchTokens)) {
      signal.throwIfAborted();
      const pass = padPass(encodings, indices, this.tokenizer.pad_token_id ?? 0, this.paddingSide());
      const feeds: Record<string, Tensor> = {};
      for (const [key, { data, dims }] of Object.entries(pass.tensors)) feeds[key] = new this.t.Tensor('int64', data, dims);
      const hidden = await this.exclusive(() => this.#forward(feeds));
      const vectors = pool(hidden.data, hidden.dims, pass.mask, this.layout.pooling);
      indices.forEach((i, k) => (embeddings[i] = finish(vectors[k]!, params.dimensions, params.normalize ?? true)));
    }
    return { embeddings, promptTokens: lengths.reduce((a, b) => a + b, 0) };
  }

  /** Token ids per input, cut to the model's limit or rejected when `truncate` is false. */
  #tokenize(inputs: string[], truncate: boolean): Encoding[] {
    const max = this.layout.shape.maxTokens;
    const columns = this.tokenizer(inputs, {
      padding: false,
      truncation: truncate,
      max_length: max,
      return_tensor: false,
    }) as unknown as Record<string, number[][]>;
    const keys = Object.keys(columns);
    const rows = inputs.map((_, i) => Object.fromEntries(keys.map((k) => [k, columns[k]![i]!])) as Encoding);
    if (!truncate && rows.some((r) => r['input_ids']!.length > max)) {
      throw Errors.badRequest('the input length exceeds the context length');
    }
    return rows;
  }

  /** One forward pass; the token vectors as float32 `[inputs, tokens, width]`. */
  async #forward(feeds: Record<string, Tensor>): Promise<{ data: Float32Array; dims: number[] }> {
    let outputs: Record<string, Tensor | undefined>;
    try {
      outputs = (await this.network(feeds)) as Record<string, Tensor | undefined>;
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${describeError(err, this.layout.dir)}`, { cause: err });
    }
    // The same output the feature-extraction pipeline takes, in the same order.
    let hidden = outputs['last_hidden_state'] ?? outputs['logits'] ?? outputs['token_embeddings'];
    if (!hidden || hidden.dims.length !== 3) {
      throw Errors.engineFailed(`model "${this.name}" does not output token vectors (last_hidden_state)`);
    }
    if (hidden.type !== 'float32') hidden = hidden.to('float32');
    return { data: hidden.data as Float32Array, dims: hidden.dims };
  }
}
