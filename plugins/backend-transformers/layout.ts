/**
 * Reads a model folder in the Hugging Face ONNX layout (`config.json`, `tokenizer.json`,
 * `tokenizer_config.json`, `onnx/model*.onnx` or an encoder-decoder's `onnx/encoder_model*.onnx` and
 * `onnx/decoder_model_merged*.onnx`, and the sentence-transformers, preprocessor and generation
 * configs when present) without loading anything heavy: which weights files to run, how many
 * tokens one input may have, how to pool, how wide the vectors are and how many bytes the files
 * take. Every missing file is a clear error that names it; nothing is fetched.
 *
 * @module
 */
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { Errors } from 'lia/plugin';
import { headOf, isSpeech, voicesOf, type OnnxHead } from './head.js';
import type { Pooling } from './pooling.js';

/**
 * Weight variants a folder may carry, in the order `auto` tries them, with the suffix each one
 * puts on a graph's name (the suffixes transformers.js uses: `model.onnx`,
 * `model_quantized.onnx`, `encoder_model_fp16.onnx`, ...).
 */
export const DTYPE_SUFFIXES = {
  fp32: '',
  q8: '_quantized',
  fp16: '_fp16',
  int8: '_int8',
  uint8: '_uint8',
  q4: '_q4',
  q4f16: '_q4f16',
  bnb4: '_bnb4',
} as const;

/** A weights variant by its transformers.js name. */
export type OnnxDtype = keyof typeof DTYPE_SUFFIXES;

/** The weights file of a one-graph model in each variant (`onnx/model.onnx`, `onnx/model_quantized.onnx`, ...). */
export const DTYPE_FILES = Object.fromEntries(Object.entries(DTYPE_SUFFIXES).map(([dtype, suffix]) => [dtype, `onnx/model${suffix}.onnx`])) as Record<
  OnnxDtype,
  string
>;

/** The graphs a head runs: one `model`, or an encoder-decoder's encoder and merged decoder (the cache-aware one transformers.js loads). */
export function graphsOf(head: OnnxHead): readonly string[] {
  return head.kind === 'whisper' || head.kind === 'moonshine' ? ['encoder_model', 'decoder_model_merged'] : ['model'];
}

/** The files of `graphs` in variant `dtype`, relative to the folder. */
export function weightFiles(graphs: readonly string[], dtype: OnnxDtype): string[] {
  return graphs.map((g) => `onnx/${g}${DTYPE_SUFFIXES[dtype]}.onnx`);
}

/** The files without which no model loads (the weights are checked separately). */
export const REQUIRED_FILES = ['config.json', 'tokenizer.json', 'tokenizer_config.json'] as const;

/** The shape facts of a model that sizing and truncation need. */
export interface ModelShape {
  modelType: string;
  /** Width of the vectors (`hidden_size`). */
  hiddenSize: number;
  layers: number;
  heads: number;
  intermediateSize: number;
  /** Most tokens per input, special tokens included; longer inputs are cut or rejected. */
  maxTokens: number;
}

/** What {@link readLayout} found in a folder. */
export interface OnnxLayout {
  /** Absolute path of the folder. */
  dir: string;
  dtype: OnnxDtype;
  /** The weights files (one per graph), relative to `dir`. */
  weightsFiles: string[];
  /** Bytes of the weights files and of their external-data files (`model.onnx_data*`). */
  weightsBytes: number;
  tokenizerBytes: number;
  shape: ModelShape;
  /** From the sentence-transformers pooling config; `mean` when the folder has none. */
  pooling: Pooling;
  /** An encoder (embeddings), a cross-encoder (reranking), a CTC, Whisper or Moonshine recogniser (transcription) or a synthesiser (speech), from `config.json` (head.ts). */
  head: OnnxHead;
  /** A speech model's audio input (`preprocessor_config.json`, `config.json`'s strides); absent for text models. */
  audio?: AudioShape;
  /** A synthesiser's output (`config.json`); absent for other models. */
  speech?: SpeechShape;
  /** An encoder-decoder speech model's decoder (`config.json`) and `generation_config.json` (Whisper, Moonshine); absent for the others. */
  decoder?: DecoderShape;
}

/** What a speech synthesiser says it speaks, from `config.json`. */
export interface SpeechShape {
  /** Hz of the waveform (`sampling_rate`; 16000 when absent, as MMS-TTS). */
  sampleRate: number;
  /** Voices in speaker-id order (head.ts, `voicesOf`). */
  voices: string[];
}

/** What an encoder-decoder speech model's decoder needs and holds. */
export interface DecoderShape {
  layers: number;
  /** Most tokens the decoder takes, prompt and answer together (`max_target_positions`, 448 for Whisper). */
  maxTokens: number;
  /** Encoder frames one window gives (`max_source_positions`, 1500 for Whisper: 20 ms each). */
  encoderFrames: number;
  vocabSize: number;
  /** Rows of the spectrogram (`num_mel_bins`); 0 for a model that reads the samples. */
  melBins: number;
  /** `generation_config.json` as the folder has it: the special tokens and their rules. */
  generation: Record<string, unknown>;
}

/** How a speech model reads audio. */
export interface AudioShape {
  /** Hz (`preprocessor_config.json` `sampling_rate`; 16000 when absent). */
  sampleRate: number;
  /** Seconds one pass takes at most (`chunk_length`; 30 when absent, as Whisper's window). */
  windowSeconds: number;
  /** Samples per output frame: the product of `config.json`'s `conv_stride` (320 for wav2vec2). */
  frameSamples: number;
}

/** The window of a CTC model whose preprocessor config declares none, in seconds. */
export const DEFAULT_AUDIO_WINDOW_SECONDS = 30;

/**
 * The audio shape of a speech model from its configs. A frame is the product of `conv_stride`
 * (wav2vec2), or two hops of the spectrogram (`hop_length`: Whisper's encoder halves the frames),
 * else 320 samples.
 */
export function audioShapeOf(config: Json, preprocessor: Json): AudioShape {
  const strides = Array.isArray(config['conv_stride']) ? (config['conv_stride'] as unknown[]) : [];
  const hop = positive(preprocessor['hop_length']);
  const frameSamples =
    strides.every((s) => positive(s) !== undefined) && strides.length > 0 ? strides.reduce<number>((a, s) => a * positive(s)!, 1) : hop ? 2 * hop : 320;
  return {
    sampleRate: positive(preprocessor['sampling_rate']) ?? 16000,
    windowSeconds: positive(preprocessor['chunk_length']) ?? DEFAULT_AUDIO_WINDOW_SECONDS,
    frameSamples,
  };
}

type Json = Record<string, unknown>;

function missing(model: string, file: string, why = ''): Error {
  return Errors.engineFailed(`model "${model}" cannot be loaded: its folder has no ${file}${why}`);
}

async function sizeOf(file: string): Promise<number | null> {
  try {
    const s = await stat(file);
    return s.isFile() ? s.size : null;
  } catch {
    return null;
  }
}

async function readJson(dir: string, file: string, model: string, required: boolean): Promise<Json | null> {
  let text: string;
  try {
    text = await readFile(path.join(dir, file), 'utf8');
  } catch {
    if (required) throw missing(model, file);
    return null;
  }
  try {
    const value: unknown = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value as Json;
  } catch {
    // reported below
  }
  throw Errors.engineFailed(`model "${model}" cannot be loaded: ${file} is not a JSON object`);
}

function positive(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : undefined;
}

/**
 * The token limit per input: the smallest of the tokenizer's `model_max_length` (ignored when it
 * is the "no limit" sentinel, 1e30), the model's `max_position_embeddings` and, when the folder
 * has a `sentence_bert_config.json`, its `max_seq_length` (what sentence-transformers cuts at).
 * Defaults to 512 when none is given.
 */
export function tokenLimit(config: Json, tokenizerConfig: Json, sentenceConfig: Json | null): number {
  const candidates = [
    positive(tokenizerConfig['model_max_length']),
    positive(config['max_position_embeddings']),
    positive(sentenceConfig?.['max_seq_length']),
  ].filter((n): n is number => n !== undefined && n < 1e9);
  return candidates.length > 0 ? Math.min(...candidates) : 512;
}

/** The shape of a model from its `config.json` (BERT names, with common aliases; an encoder-decoder's encoder). */
export function shapeOf(config: Json, maxTokens: number): ModelShape {
  const hiddenSize = positive(config['hidden_size']) ?? positive(config['d_model']) ?? positive(config['dim']) ?? 768;
  return {
    modelType: typeof config['model_type'] === 'string' ? config['model_type'] : 'unknown',
    hiddenSize,
    layers:
      positive(config['encoder_layers']) ??
      positive(config['encoder_num_hidden_layers']) ??
      positive(config['num_hidden_layers']) ??
      positive(config['n_layers']) ??
      12,
    heads:
      positive(config['encoder_attention_heads']) ??
      positive(config['encoder_num_attention_heads']) ??
      positive(config['num_attention_heads']) ??
      positive(config['n_heads']) ??
      12,
    intermediateSize: positive(config['encoder_ffn_dim']) ?? positive(config['intermediate_size']) ?? positive(config['hidden_dim']) ?? hiddenSize * 4,
    maxTokens,
  };
}

/**
 * An encoder-decoder speech model's decoder from its `config.json` (Whisper's names, Moonshine's
 * `decoder_num_hidden_layers` and `max_position_embeddings`) and `generation_config.json`. A
 * model without `max_source_positions` (Moonshine reads raw samples) has a frame per
 * {@link AudioShape.frameSamples} of a window.
 */
export function decoderShapeOf(config: Json, generation: Json, audio: AudioShape): DecoderShape {
  return {
    layers: positive(config['decoder_layers']) ?? positive(config['decoder_num_hidden_layers']) ?? positive(config['num_hidden_layers']) ?? 4,
    maxTokens: positive(config['max_target_positions']) ?? positive(config['max_position_embeddings']) ?? positive(generation['max_length']) ?? 448,
    encoderFrames: positive(config['max_source_positions']) ?? Math.ceil((audio.sampleRate * audio.windowSeconds) / audio.frameSamples),
    vocabSize: positive(config['vocab_size']) ?? 51865,
    melBins: positive(config['num_mel_bins']) ?? 0,
    generation,
  };
}

/**
 * The pooling a sentence-transformers folder declares (`modules.json` → its Pooling module's
 * `config.json`, else `1_Pooling/config.json`): `mean`, `cls` or `lasttoken`. Folders without
 * one mean-pool. Modes this backend does not run (max, weighted mean, concatenations) are an
 * error rather than silently different vectors.
 */
export async function poolingOf(dir: string, model: string): Promise<Pooling> {
  const modules = await readJsonAny(dir, 'modules.json', model);
  let folder = '1_Pooling';
  if (Array.isArray(modules)) {
    const isPooling = (m: unknown): boolean => {
      const type = (m as Json | null)?.['type'];
      return typeof type === 'string' && type.endsWith('.Pooling');
    };
    const p = (modules.find(isPooling) as Json | undefined)?.['path'];
    if (typeof p === 'string' && /^\w[\w.-]*$/.test(p)) folder = p;
  }
  const config = await readJson(dir, `${folder}/config.json`, model, false);
  if (!config) return 'mean';
  const modes = Object.entries(config)
    .filter(([k, v]) => k.startsWith('pooling_mode_') && v === true)
    .map(([k]) => k.slice('pooling_mode_'.length));
  const known: Record<string, Pooling> = { mean_tokens: 'mean', cls_token: 'cls', lasttoken: 'lasttoken' };
  if (modes.length === 0) return 'mean';
  if (modes.length === 1 && known[modes[0]!]) return known[modes[0]!]!;
  const asked = `${modes.join(' + ')} pooling (${folder}/config.json)`;
  throw Errors.engineFailed(`model "${model}" asks for ${asked}; this backend runs mean, cls or lasttoken pooling`);
}

async function readJsonAny(dir: string, file: string, model: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path.join(dir, file), 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw Errors.engineFailed(`model "${model}" cannot be loaded: ${file} is not valid JSON`);
  }
}

async function weightsBytes(dir: string, file: string): Promise<number> {
  const main = (await sizeOf(path.join(dir, file))) ?? 0;
  // Models over 2 GB keep their tensors beside the graph (model.onnx_data, model.onnx_data_1, ...).
  let external = 0;
  for (let i = 0; ; i++) {
    const size = await sizeOf(path.join(dir, `${file}_data${i === 0 ? '' : `_${i}`}`));
    if (size === null) break;
    external += size;
  }
  return main + external;
}

/**
 * Picks the weights variant: the one `dtype` names, or with `auto` the first variant whose files
 * for every graph of the head are present, in {@link DTYPE_SUFFIXES} order (fp32 `model.onnx`
 * first, then q8 `model_quantized.onnx`, ...).
 */
export async function pickWeights(dir: string, dtype: OnnxDtype | 'auto', model: string, graphs: readonly string[] = ['model']): Promise<OnnxDtype> {
  const present = async (d: OnnxDtype) => {
    for (const file of weightFiles(graphs, d)) if ((await sizeOf(path.join(dir, file))) === null) return file;
    return null;
  };
  if (dtype !== 'auto') {
    const absent = await present(dtype);
    if (absent) throw missing(model, absent, ` (the "${dtype}" weights that the backend-transformers dtype option asks for)`);
    return dtype;
  }
  for (const name of Object.keys(DTYPE_SUFFIXES) as OnnxDtype[]) {
    if ((await present(name)) === null) return name;
  }
  const both = (d: OnnxDtype) => weightFiles(graphs, d).join(' and ');
  throw missing(model, `${both('fp32')} or ${both('q8')}`);
}

/** Reads the folder of `model` (its store name, for messages) and checks that it can load. */
export async function readLayout(dir: string, dtype: OnnxDtype | 'auto', model: string): Promise<OnnxLayout> {
  const abs = path.resolve(dir);
  for (const file of REQUIRED_FILES) {
    if ((await sizeOf(path.join(abs, file))) === null) throw missing(model, file);
  }
  const config = (await readJson(abs, 'config.json', model, true))!;
  const tokenizerConfig = (await readJson(abs, 'tokenizer_config.json', model, true))!;
  const sentenceConfig = await readJson(abs, 'sentence_bert_config.json', model, false);
  const head = headOf(config);
  const chosen = await pickWeights(abs, dtype, model, graphsOf(head));
  const preprocessor = isSpeech(head) ? (await readJson(abs, 'preprocessor_config.json', model, true))! : null;
  const audio = preprocessor ? audioShapeOf(config, preprocessor) : undefined;
  const generation = graphsOf(head).length > 1 ? (await readJson(abs, 'generation_config.json', model, true))! : null;
  const files = weightFiles(graphsOf(head), chosen);
  let bytes = 0;
  for (const file of files) bytes += await weightsBytes(abs, file);
  const speech = head.kind === 'vits' ? { sampleRate: positive(config['sampling_rate']) ?? 16000, voices: voicesOf(config) } : null;
  return {
    dir: abs,
    dtype: chosen,
    weightsFiles: files,
    weightsBytes: bytes,
    tokenizerBytes: (await sizeOf(path.join(abs, 'tokenizer.json'))) ?? 0,
    shape: shapeOf(config, tokenLimit(config, tokenizerConfig, sentenceConfig)),
    pooling: await poolingOf(abs, model),
    head,
    ...(audio ? { audio } : {}),
    ...(audio && generation ? { decoder: decoderShapeOf(config, generation, audio) } : {}),
    ...(speech ? { speech } : {}),
  };
}
