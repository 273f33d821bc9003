/**
 * A loaded ONNX Whisper speech recogniser (`WhisperForConditionalGeneration`: an encoder and a
 * merged decoder, the Hugging Face ONNX layout) behind the {@link LoadedModel} contract, run by
 * transformers.js's own Whisper model, feature extractor (`preprocessor_config.json`: the
 * log-mel spectrogram of a 30 s window) and `generate`. `transcribe` takes one window of mono
 * samples at the model's rate (the engine decodes, resamples and cuts the audio at the window,
 * `chunk_length`) and decodes it as Whisper does: the previous window's text after
 * `<|startofprev|>`, `<|startoftranscript|>`, the language (the hint, or the one the model
 * detects at that step), the task (`<|transcribe|>` or `<|translate|>`), then text between
 * timestamp tokens, one segment per pair (whisper-decoding.ts); a window the model hears no
 * speech in (Whisper's no-speech rule) has no text. Passes run one at a time;
 * `unload` waits for the one in flight; an aborted request stops generating at the next token.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AudioInput, LoadedModel, TranscribeParams, TranscribeResult } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import type { AudioShape, DecoderShape, OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { describeError, OnnxModel } from './onnx-model.js';
import { generateTokens, loadSeq2Seq, logitsStep } from './generation.js';
import type { Transformers } from './runtime.js';
import type { Tokenizer } from './tokens.js';
import { heardNothing, languageCode, planWindow, timedSegments, whisperTokens, WindowSteering, type WhisperTokens } from './whisper-decoding.js';

type Network = Awaited<ReturnType<Transformers['WhisperForConditionalGeneration']['from_pretrained']>>;
type FeatureExtractor = Awaited<ReturnType<Transformers['AutoFeatureExtractor']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;
type TimestampRules = ConstructorParameters<Transformers['WhisperTimeStampLogitsProcessor']>[0];

/** Loads the tokenizer, feature extractor and network of a Whisper `model` from its folder. */
export async function loadWhisper(model: ResolvedModel, layout: OnnxLayout, settings: EncoderSettings): Promise<LoadedModel> {
  return loadSeq2Seq(
    model,
    layout,
    settings,
    (t) => t.WhisperForConditionalGeneration,
    ({ t, config, tokenizer, extractor, network, audio, decoder }) => {
      const vocab = tokenizer.get_vocab() as Map<string, number> | Record<string, number>;
      const idOf = (token: string) => (vocab instanceof Map ? vocab.get(token) : vocab[token]);
      const tokens = whisperTokens(model.name, decoder.generation, config as unknown as Record<string, unknown>, idOf, {
        timePrecision: audio.windowSeconds / decoder.encoderFrames,
        maxTokens: decoder.maxTokens,
      });
      return new WhisperModel(t, model.name, layout, audio, decoder, tokens, tokenizer, extractor, network, settings);
    },
  );
}

class WhisperModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['transcription'];
  readonly audio: AudioInput;

  constructor(
    private readonly t: Transformers,
    name: string,
    layout: OnnxLayout,
    private readonly shape: AudioShape,
    private readonly decoder: DecoderShape,
    private readonly tokens: WhisperTokens,
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
    const prompt = params.prompt ? this.tokenizer.encode(` ${params.prompt.trim()}`, { add_special_tokens: false }) : [];
    const plan = planWindow(this.tokens, { task: params.task, language: params.language, prompt });
    const steering = new WindowSteering(this.tokens, plan);
    const sequence = await this.exclusive(() => this.#generate(params, plan.prefix, plan.forced.length, steering, signal));
    signal.throwIfAborted();
    const { generated, avgLogprob } = steering.finish(sequence);
    const seconds = params.samples.length / this.shape.sampleRate;
    const silent = heardNothing(steering.noSpeechProb, avgLogprob);
    const segments = timedSegments(silent ? [] : generated, this.tokens, seconds)
      .map((s) => ({ start: s.start, end: Math.min(s.end, Math.max(seconds, s.start)), text: this.#text(s.ids), tokens: s.ids }))
      .filter((s) => s.text.length > 0);
    const language = steering.language !== undefined ? languageCode(this.tokens, steering.language) : this.tokens.languages.size === 0 ? 'en' : undefined;
    return {
      text: segments.map((s) => s.text).join(' '),
      words: [],
      tokens: segments.flatMap((s) => s.tokens),
      avgLogprob,
      noSpeechProb: steering.noSpeechProb,
      segments,
      ...(language ? { language } : {}),
    };
  }

  #text(ids: number[]): string {
    return this.tokenizer.decode(ids, { skip_special_tokens: true }).trim();
  }

  /** One window through the encoder and the decoder; the whole token sequence, prefix included. */
  async #generate(params: TranscribeParams, prefix: number[], forced: number, steering: WindowSteering, signal: AbortSignal): Promise<number[]> {
    const t = this.t;
    const processors = new t.LogitsProcessorList();
    processors.push(logitsStep(t, (ids, logits) => steering.steer(ids, logits)));
    if (this.tokens.noTimestamps !== undefined) {
      // The library's timestamp rules (in pairs, text between them), counted from the first
      // token after the forced ones.
      const generation = this.decoder.generation;
      const rules = {
        eos_token_id: this.tokens.eot,
        no_timestamps_token_id: this.tokens.noTimestamps,
        max_initial_timestamp_index: typeof generation['max_initial_timestamp_index'] === 'number' ? generation['max_initial_timestamp_index'] : 50,
      };
      const init = [...prefix, ...new Array<number>(forced).fill(this.tokens.sot)];
      processors.push(new t.WhisperTimeStampLogitsProcessor(rules as TimestampRules, init));
    }
    processors.push(logitsStep(t, (ids, logits) => steering.record(ids, logits)));
    const { input_features } = await this.#features(params.samples);
    return generateTokens(
      t,
      this.network,
      {
        inputs: input_features,
        decoder_input_ids: prefix,
        max_new_tokens: Math.max(1, this.decoder.maxTokens - prefix.length),
        return_timestamps: false,
        // Applied by the steering at the first text token, after the forced ones.
        begin_suppress_tokens: [],
        logits_processor: processors,
      },
      { temperature: params.temperature, signal, model: this.name, dir: this.layout.dir },
    );
  }

  async #features(samples: Float32Array): Promise<{ input_features: Tensor }> {
    try {
      return (await this.extractor(samples)) as { input_features: Tensor };
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${describeError(err, this.layout.dir)}`, { cause: err });
    }
  }
}
