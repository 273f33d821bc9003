/**
 * What the encoder-decoder speech models (whisper.ts, moonshine.ts) share around
 * transformers.js's `generate`: logits processors made of plain functions, the log probabilities
 * of the tokens chosen, the call itself (one sequence of token ids, ended early when the
 * request is aborted, greedy at temperature 0 and sampled above it, a failure an engine error
 * with the folder's path kept out), and the loading of their folders.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import type { AudioShape, DecoderShape, OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { describeError, FOLDER_ONLY, loadFolder, networkOptions } from './onnx-model.js';
import { transformers, type Transformers } from './runtime.js';
import type { Tokenizer } from './tokens.js';

type Tensor = InstanceType<Transformers['Tensor']>;
type LogitsProcessor = InstanceType<Transformers['LogitsProcessor']>;

type Config = Awaited<ReturnType<Transformers['AutoConfig']['from_pretrained']>>;
type FeatureExtractor = Awaited<ReturnType<Transformers['AutoFeatureExtractor']['from_pretrained']>>;

/** What an encoder-decoder speech model's folder loads into, for its model class to take. */
export interface Seq2SeqParts<N> {
  t: Transformers;
  config: Config;
  tokenizer: Tokenizer;
  extractor: FeatureExtractor;
  network: N;
  audio: AudioShape;
  decoder: DecoderShape;
}

/**
 * Loads an encoder-decoder speech model from its folder: its config, tokenizer, feature
 * extractor and the network `networkOf` names (transformers.js's own class), then `build` makes the
 * loaded model of them. A folder without its preprocessor or generation config is an engine error.
 */
export async function loadSeq2Seq<N>(
  model: ResolvedModel,
  layout: OnnxLayout,
  settings: EncoderSettings,
  networkOf: (t: Transformers) => { from_pretrained(dir: string, options: Record<string, unknown>): Promise<N> },
  build: (parts: Seq2SeqParts<N>) => LoadedModel,
): Promise<LoadedModel> {
  const { audio, decoder } = layout;
  if (!audio || !decoder)
    throw Errors.engineFailed(`model "${model.name}" cannot be loaded: its folder has no preprocessor_config.json or generation_config.json`);
  const t = await transformers();
  return loadFolder(model, layout, async () => {
    const config = await t.AutoConfig.from_pretrained(layout.dir, FOLDER_ONLY);
    const tokenizer = await t.AutoTokenizer.from_pretrained(layout.dir, FOLDER_ONLY);
    const extractor = await t.AutoFeatureExtractor.from_pretrained(layout.dir, FOLDER_ONLY);
    const network = await networkOf(t).from_pretrained(layout.dir, { ...networkOptions(layout, settings), config });
    return build({ t, config, tokenizer, extractor, network, audio, decoder });
  });
}

/** `log Σ exp(x)` of a row of logits (-Infinity when every entry is). */
export function logSumExp(row: ArrayLike<number>): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  if (max === -Infinity) return -Infinity;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return max + Math.log(sum);
}

/** A logits processor that hands `apply` the sequence so far and the step's logits (one sequence: the batch is 1). */
export function logitsStep(t: Transformers, apply: (ids: readonly bigint[], logits: Float32Array) => void): LogitsProcessor {
  const processor = new t.LogitsProcessor();
  processor._call = (ids: bigint[][], logits: Tensor) => {
    apply(ids[0]!, logits.data as Float32Array);
    return logits;
  };
  return processor;
}

/**
 * The log probabilities of the tokens a generation chose, from the logits each was chosen from:
 * {@link record} runs as the last logits processor; tokens before position `from` of the
 * sequence (the prefix, forced tokens) are not counted.
 */
export class TokenScores {
  readonly #logprobs: number[] = [];
  #last: { logits: Float32Array; lse: number } | undefined;

  record(ids: readonly unknown[], logits: Float32Array, from: number): void {
    if (ids.length < from) return;
    if (ids.length > from) this.#score(Number(ids.at(-1)));
    this.#last = { logits: logits.slice(), lse: logSumExp(logits) };
  }

  #score(token: number): void {
    if (!this.#last) return;
    const lp = this.#last.logits[token]! - this.#last.lse;
    if (Number.isFinite(lp)) this.#logprobs.push(lp);
  }

  /** The mean log probability, once the whole `sequence` is known (its last token is scored here); 0 without tokens. */
  mean(sequence: readonly number[], from: number): number {
    if (sequence.length > from) this.#score(sequence.at(-1)!);
    return this.#logprobs.length > 0 ? this.#logprobs.reduce((a, b) => a + b, 0) / this.#logprobs.length : 0;
  }
}

/** The network of an encoder-decoder model, as far as generating goes. */
interface Generating {
  generate(options: Record<string, unknown>): Promise<unknown>;
}

/**
 * Runs `network.generate(options)` for one window and returns its token ids, prefix included.
 * A stopping criterion ends the generation at the next token once `signal` aborts (the caller
 * checks the signal after); `temperature` above 0 samples, else decoding is greedy.
 */
export async function generateTokens(
  t: Transformers,
  network: Generating,
  options: Record<string, unknown>,
  { temperature = 0, signal, model, dir }: { temperature?: number | undefined; signal: AbortSignal; model: string; dir: string },
): Promise<number[]> {
  const stop = new t.StoppingCriteria();
  stop._call = (ids: number[][]) => ids.map(() => signal.aborted);
  try {
    const output = (await network.generate({
      ...options,
      stopping_criteria: [stop],
      ...(temperature > 0 ? { do_sample: true, temperature } : { do_sample: false }),
    })) as Tensor;
    return (output.tolist() as bigint[][])[0]!.map(Number);
  } catch (err) {
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : err;
    throw Errors.engineFailed(`model "${model}" failed: ${describeError(err, dir)}`, { cause: err });
  }
}
