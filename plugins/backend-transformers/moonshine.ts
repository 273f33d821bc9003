/**
 * A loaded ONNX Moonshine speech recogniser (`MoonshineForConditionalGeneration`: an encoder on
 * the raw samples and a merged decoder, the Hugging Face ONNX layout) behind the
 * {@link LoadedModel} contract, run by transformers.js's own Moonshine model, feature extractor
 * (`preprocessor_config.json`) and `generate`. `transcribe` takes one window of mono samples at
 * the model's rate (the engine cuts at the window, `chunk_length`, 30 s when absent) and writes
 * its text from `<s>` to `</s>`, at most 6 tokens a second of audio (the Moonshine paper's limit
 * against repetition, as the library's pipeline applies it). Moonshine has one language and no
 * language, task, prompt or timestamp tokens: it ignores `language` and `prompt`, transcribes
 * when asked to translate, and a window is one segment. Passes run one at a time; `unload` waits
 * for the one in flight; an aborted request stops generating at the next token.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AudioInput, LoadedModel, TranscribeParams, TranscribeResult } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import { generateTokens, loadSeq2Seq, logitsStep, TokenScores } from './generation.js';
import type { AudioShape, DecoderShape, OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { describeError, OnnxModel } from './onnx-model.js';
import type { Transformers } from './runtime.js';
import type { Tokenizer } from './tokens.js';

type Network = Awaited<ReturnType<Transformers['MoonshineForConditionalGeneration']['from_pretrained']>>;
type FeatureExtractor = Awaited<ReturnType<Transformers['AutoFeatureExtractor']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;

/** Tokens a second of audio at most (the Moonshine paper's heuristic). */
const TOKENS_PER_SECOND = 6;

/** Loads the tokenizer, feature extractor and network of a Moonshine `model` from its folder. */
export async function loadMoonshine(model: ResolvedModel, layout: OnnxLayout, settings: EncoderSettings): Promise<LoadedModel> {
  return loadSeq2Seq(
    model,
    layout,
    settings,
    (t) => t.MoonshineForConditionalGeneration,
    (p) => new MoonshineModel(p.t, model.name, layout, p.audio, p.decoder, p.tokenizer, p.extractor, p.network, settings),
  );
}

class MoonshineModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['transcription'];
  readonly audio: AudioInput;

  constructor(
    private readonly t: Transformers,
    name: string,
    layout: OnnxLayout,
    private readonly shape: AudioShape,
    private readonly decoder: DecoderShape,
    tokenizer: Tokenizer,
    private readonly extractor: FeatureExtractor,
    private readonly network: Network,
    settings: EncoderSettings,
  ) {
    super(name, layout, tokenizer, network, settings);
    this.audio = { sampleRate: shape.sampleRate, windowSeconds: shape.windowSeconds };
  }

  async transcribe(params: TranscribeParams, signal: AbortSignal): Promise<TranscribeResult> {
    this.checkLoaded();
    signal.throwIfAborted();
    const seconds = params.samples.length / this.shape.sampleRate;
    const scores = new TokenScores();
    // The sequence starts with the decoder's start token: the scored tokens follow it.
    const sequence = await this.exclusive(() => this.#generate(params, seconds, scores, signal));
    signal.throwIfAborted();
    const avgLogprob = scores.mean(sequence, 1);
    const special = new Set(this.tokenizer.all_special_ids);
    const tokens = sequence.slice(1).filter((id) => !special.has(id));
    // The library refuses to decode no tokens.
    const text = tokens.length > 0 ? this.tokenizer.decode(tokens, { skip_special_tokens: true }).trim() : '';
    return { text, words: [], tokens: text ? tokens : [], avgLogprob, noSpeechProb: text ? 0 : 1 };
  }

  async #generate(params: TranscribeParams, seconds: number, scores: TokenScores, signal: AbortSignal): Promise<number[]> {
    const t = this.t;
    let inputs: Tensor;
    try {
      inputs = ((await this.extractor(params.samples)) as { input_values: Tensor }).input_values;
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${describeError(err, this.layout.dir)}`, { cause: err });
    }
    const processors = new t.LogitsProcessorList();
    processors.push(logitsStep(t, (ids, logits) => scores.record(ids, logits, 1)));
    const limit = Math.min(Math.ceil(seconds * TOKENS_PER_SECOND), this.decoder.maxTokens - 1);
    return generateTokens(
      t,
      this.network,
      { inputs, max_new_tokens: Math.max(1, limit), logits_processor: processors },
      { temperature: params.temperature, signal, model: this.name, dir: this.layout.dir },
    );
  }
}
