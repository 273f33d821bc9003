/**
 * A loaded ONNX CTC speech recogniser (`Wav2Vec2ForCTC` and its kin: HuBERT, WavLM, UniSpeech)
 * behind the {@link LoadedModel} contract: `transcribe` takes one window of mono samples at the
 * model's rate (the engine decodes, resamples and cuts the audio), prepares it as the folder's
 * feature extractor says (`preprocessor_config.json`: the normalisation the model was trained
 * with; a plain `Wav2Vec2FeatureExtractor`'s is computed here, {@link normalizeWindow}, any other
 * runs in the library), runs the network and reads the characters greedily off the frames'
 * logits (CTC: a repeated symbol is one, the blank separates, the word delimiter `|` ends a
 * word), timing each word by its first and last frame. A CTC model has one language and cannot translate: asked to, it
 * transcribes (docs/audio.md). Passes run one at a time; `unload` waits for the one in flight.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AudioInput, LoadedModel, TranscribedWord, TranscribeParams, TranscribeResult } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import type { AudioShape, OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { describeError, FOLDER_ONLY, loadFolder, networkOptions, OnnxModel } from './onnx-model.js';
import { transformers, type Transformers } from './runtime.js';
import type { Tokenizer } from './tokens.js';

type Network = Awaited<ReturnType<Transformers['AutoModelForCTC']['from_pretrained']>>;
type FeatureExtractor = Awaited<ReturnType<Transformers['AutoFeatureExtractor']['from_pretrained']>>;
type Tensor = InstanceType<Transformers['Tensor']>;

/** Loads the tokenizer, feature extractor and network of `model` from its folder. */
export async function loadCtc(model: ResolvedModel, layout: OnnxLayout, settings: EncoderSettings): Promise<LoadedModel> {
  const audio = layout.audio;
  if (!audio) throw Errors.engineFailed(`model "${model.name}" cannot be loaded: its folder has no preprocessor_config.json`);
  const t = await transformers();
  return loadFolder(model, layout, async () => {
    const tokenizer = await t.AutoTokenizer.from_pretrained(layout.dir, FOLDER_ONLY);
    const extractor = await t.AutoFeatureExtractor.from_pretrained(layout.dir, FOLDER_ONLY);
    const network = await t.AutoModelForCTC.from_pretrained(layout.dir, networkOptions(layout, settings));
    return new CtcModel(t, model.name, layout, audio, tokenizer, extractor, network, settings);
  });
}

/** The symbols a CTC vocabulary gives meaning to. */
export interface CtcVocabulary {
  /** Token text by id. */
  pieces: string[];
  /** The blank (the pad token). */
  blank: number;
  /** The word delimiter (`|`), or -1. */
  delimiter: number;
  /** Ids that are never text (`<s>`, `</s>`, `<unk>`). */
  special: Set<number>;
}

/** The pieces, blank, delimiter and special ids of a CTC tokenizer (`Wav2Vec2CTCTokenizer`). */
export function vocabularyOf(tokenizer: Tokenizer): CtcVocabulary {
  const vocab = tokenizer.get_vocab() as Map<string, number> | Record<string, number>;
  const entries: [string, number][] = vocab instanceof Map ? [...vocab.entries()] : Object.entries(vocab);
  const pieces: string[] = [];
  for (const [piece, id] of entries) pieces[id] = piece;
  const idOf = (piece: string | null | undefined) => (piece ? entries.find(([p]) => p === piece)?.[1] : undefined);
  const blank = tokenizer.pad_token_id ?? idOf('<pad>') ?? 0;
  const delimiter = idOf((tokenizer as unknown as { config?: { word_delimiter_token?: string } }).config?.word_delimiter_token ?? '|') ?? -1;
  const special = new Set<number>(tokenizer.all_special_ids.filter((id) => id !== blank));
  return { pieces, blank, delimiter, special };
}

/** The text, words and statistics of a window from its logits `[frames, vocab]` (greedy CTC). */
export function decodeCtc(logits: Float32Array, vocabSize: number, vocab: CtcVocabulary, secondsPerFrame: number): TranscribeResult {
  const frames = Math.floor(logits.length / vocabSize);
  const tokens: number[] = [];
  const words: TranscribedWord[] = [];
  let word = '';
  let wordStart = 0;
  let lastFrame = 0;
  let previous = -1;
  let logprobSum = 0;
  let blanks = 0;
  const endWord = () => {
    if (word) words.push({ word, start: wordStart * secondsPerFrame, end: (lastFrame + 1) * secondsPerFrame });
    word = '';
  };
  for (let f = 0; f < frames; f++) {
    const row = logits.subarray(f * vocabSize, (f + 1) * vocabSize);
    let best = 0;
    for (let v = 1; v < vocabSize; v++) if (row[v]! > row[best]!) best = v;
    if (best === vocab.blank) blanks++;
    if (best === previous) {
      // A letter held over several frames stretches its word; a held blank, delimiter or special token does not.
      if (best !== vocab.blank && best !== vocab.delimiter && !vocab.special.has(best)) lastFrame = f;
      continue;
    }
    previous = best;
    if (best === vocab.blank || vocab.special.has(best)) continue;
    tokens.push(best);
    logprobSum += logSoftmaxAt(row, best);
    if (best === vocab.delimiter) {
      endWord();
      continue;
    }
    if (!word) wordStart = f;
    word += vocab.pieces[best] ?? '';
    lastFrame = f;
  }
  endWord();
  return {
    text: words.map((w) => w.word).join(' '),
    words,
    tokens,
    avgLogprob: tokens.length > 0 ? logprobSum / tokens.length : 0,
    noSpeechProb: frames > 0 ? blanks / frames : 1,
  };
}

/**
 * What `Wav2Vec2FeatureExtractor` makes of a window when its config says `do_normalize`: the
 * samples less their mean, over the square root of their variance plus 1e-7. The same operations
 * in the same order as the library's, so the same floats, but in plain loops: the library's
 * `reduce` and `map` closures, and the attention mask of 64-bit ones it builds for every window
 * whether the network reads one or not, cost more than the pass of a small network, on the
 * model's thread (docs/audio.md, *Speed*).
 */
export function normalizeWindow(samples: Float32Array): Float32Array {
  const n = samples.length;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += samples[i]!;
  const mean = sum / n;
  let squares = 0;
  for (let i = 0; i < n; i++) squares += (samples[i]! - mean) ** 2;
  const scale = Math.sqrt(squares / n + 1e-7);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (samples[i]! - mean) / scale;
  return out;
}

function logSoftmaxAt(row: Float32Array, index: number): number {
  let max = -Infinity;
  for (const x of row) if (x > max) max = x;
  let sum = 0;
  for (const x of row) sum += Math.exp(x - max);
  return row[index]! - max - Math.log(sum);
}

class CtcModel extends OnnxModel {
  readonly capabilities: readonly ModelCapability[] = ['transcription'];
  readonly audio: AudioInput;
  readonly #vocab: CtcVocabulary;
  /** The network's inputs for a window without the library's extractor, where its work is known (a plain `Wav2Vec2FeatureExtractor`). */
  readonly #features: ((samples: Float32Array) => Record<string, Tensor>) | undefined;

  constructor(
    t: Transformers,
    name: string,
    layout: OnnxLayout,
    private readonly shape: AudioShape,
    tokenizer: Tokenizer,
    private readonly extractor: FeatureExtractor,
    private readonly network: Network,
    settings: EncoderSettings,
  ) {
    super(name, layout, tokenizer, network, settings);
    this.audio = { sampleRate: shape.sampleRate, windowSeconds: shape.windowSeconds };
    this.#vocab = vocabularyOf(tokenizer);
    if (extractor.constructor === t.Wav2Vec2FeatureExtractor) {
      const normalize = (extractor as unknown as { config: { do_normalize?: boolean } }).config.do_normalize === true;
      const inputs = (network as unknown as { sessions?: Record<string, { inputNames?: string[] } | undefined> }).sessions?.['model']?.inputNames ?? [];
      const mask = inputs.includes('attention_mask');
      this.#features = (samples) => {
        const values = normalize ? normalizeWindow(samples) : samples;
        const dims = [1, values.length];
        return {
          input_values: new t.Tensor('float32', values, dims),
          // One unpadded window: every sample is real.
          ...(mask ? { attention_mask: new t.Tensor('int64', new BigInt64Array(values.length).fill(1n), dims) } : {}),
        };
      };
    }
  }

  async transcribe(params: TranscribeParams, signal: AbortSignal): Promise<TranscribeResult> {
    this.checkLoaded();
    signal.throwIfAborted();
    // Shorter than one frame, the network has nothing to read.
    if (params.samples.length < this.shape.frameSamples) return { text: '', words: [], tokens: [], avgLogprob: 0, noSpeechProb: 1 };
    const logits = await this.exclusive(() => this.#forward(params.samples));
    return decodeCtc(logits.data, logits.vocab, this.#vocab, this.shape.frameSamples / this.shape.sampleRate);
  }

  /** One pass over a window; the logits `[frames × vocab]`. */
  async #forward(samples: Float32Array): Promise<{ data: Float32Array; vocab: number }> {
    let logits: Tensor | undefined;
    try {
      const inputs = this.#features?.(samples) ?? ((await this.extractor(samples)) as Record<string, Tensor>);
      logits = ((await this.network(inputs)) as Record<string, Tensor | undefined>)['logits'];
    } catch (err) {
      throw Errors.engineFailed(`model "${this.name}" failed: ${describeError(err, this.layout.dir)}`, { cause: err });
    }
    if (!logits || logits.dims.length !== 3) throw Errors.engineFailed(`model "${this.name}" does not output CTC logits [batch, frames, vocab]`);
    const data = (logits.type === 'float32' ? logits : logits.to('float32')).data as Float32Array;
    return { data, vocab: logits.dims[2]! };
  }
}
