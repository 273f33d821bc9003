/**
 * Memory estimate of a loaded ONNX model, from file sizes and `config.json` alone (nothing is
 * loaded to compute it), so the scheduler can budget an embedding or speech model like a GGUF one.
 *
 * Held = weights (onnxruntime keeps one copy of the initialisers, plus ~10% for the optimised
 * graph) + the tokenizer (the parsed vocabulary takes about 30× its JSON on the heap) + the peak
 * of one forward pass at the token budget:
 * attention scores and their softmax per head (inputs × length² cells, bounded by
 * budget × length) and the layer activations (budget × (6 × width + 2 × FFN width)), all float32.
 * With onnxruntime's CPU memory arena (the default) that peak stays held once reached; without
 * it, it is given back after each pass but still counted, as the scheduler must leave room.
 *
 * The pass term is a margin over what a pass was measured to take, not a fit (bench/results/2026-11-27-code-notes.md).
 *
 * A speech synthesiser (VITS) runs one sentence of at most 300 characters per pass: about 20 s of
 * audio, whose vocoder activations (HiFi-GAN's upsampling stages, some 2 million floats a second
 * of audio) take about 160 MB at their peak; {@link SPEECH_PASS_BYTES} counts twice that.
 *
 * @module
 */
import type { OnnxLayout } from './layout.js';
import { runsInThread } from './speech-worker.js';

/** The bytes one synthesis pass may take beside the weights (a margin, see the module comment). */
export const SPEECH_PASS_BYTES = 320 * 1024 * 1024;

/**
 * What a speech model's worker thread (speech-worker.ts) holds beside the model: its own V8 heap,
 * the modules it loads again (transformers.js and onnxruntime-node's JavaScript among them) and
 * its stack. Measured from `dist/` as the RSS an appliance gained per loaded tiny-ctc,
 * tiny-whisper and tiny-vits fixture, against the library already loaded on the main thread (where
 * these models add under 2 MB): 29 to 42 MB per thread, two runs (2026-12-07); a margin over that.
 * Run from source, where tsx compiles every module again in each thread, a thread takes 150 to
 * 200 MB: a development cost, not counted.
 */
export const THREAD_BYTES = 48 * 1024 * 1024;

/** Bytes a model holds once loaded, its worker thread included when it runs in one ({@link THREAD_BYTES}). */
export function heldBytes(layout: OnnxLayout, maxBatchTokens: number): number {
  return estimateBytes(layout, maxBatchTokens) + (runsInThread(layout.head) ? THREAD_BYTES : 0);
}

/** Bytes a model holds once loaded and while running a full pass of `maxBatchTokens` tokens, the thread it may run in aside. */
export function estimateBytes(layout: OnnxLayout, maxBatchTokens: number): number {
  if (layout.speech) return Math.ceil(layout.weightsBytes * 1.1) + layout.tokenizerBytes * 30 + SPEECH_PASS_BYTES;
  if (layout.audio && layout.decoder) {
    // An encoder-decoder speech model (Whisper, Moonshine): the encoder's pass over one window's frames,
    // then the decoder's caches (its own keys and values up to its token limit, and the
    // encoder's, per layer), a step's logits (twice: the library copies them to process them),
    // the spectrogram (Whisper) and the samples.
    const { sampleRate, windowSeconds } = layout.audio;
    const { layers, maxTokens, encoderFrames, vocabSize, melBins } = layout.decoder;
    const width = layout.shape.hiddenSize;
    const encoder = { ...layout, audio: undefined, decoder: undefined, shape: { ...layout.shape, maxTokens: encoderFrames } } as OnnxLayout;
    const caches = layers * 2 * (maxTokens + encoderFrames) * width;
    const spectrogram = melBins * 2 * encoderFrames;
    return estimateBytes(encoder, encoderFrames) + 4 * (caches + 2 * vocabSize + spectrogram + 2 * sampleRate * windowSeconds);
  }
  if (layout.audio) {
    // A speech model's pass is one window: its frames take the place of tokens, and the samples
    // and the logits are held beside it.
    const { sampleRate, windowSeconds, frameSamples } = layout.audio;
    const samples = sampleRate * windowSeconds;
    const frames = Math.ceil(samples / frameSamples);
    const text = { ...layout, audio: undefined, shape: { ...layout.shape, maxTokens: frames } } as OnnxLayout;
    return estimateBytes(text, frames) + 4 * 2 * samples;
  }
  const { hiddenSize, heads, intermediateSize, maxTokens } = layout.shape;
  const weights = Math.ceil(layout.weightsBytes * 1.1);
  const tokenizer = layout.tokenizerBytes * 30;
  const tokens = Math.max(maxBatchTokens, maxTokens);
  const attention = 2.5 * heads * tokens * maxTokens;
  const activations = tokens * (6 * hiddenSize + 2 * intermediateSize);
  return weights + tokenizer + Math.ceil(4 * (attention + activations));
}
