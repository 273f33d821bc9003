/**
 * The transformers.js inference backend: runs `onnx` models in the Hugging Face ONNX layout,
 * sentence encoders for embeddings, cross-encoders for reranking, CTC, Whisper and Moonshine
 * speech recognisers for transcription and VITS synthesisers for speech (head.ts), and tokenises
 * with their tokenizer. The scheduler (`plugins/engine`) owns the lifecycle; this
 * only sizes, loads and frees models.
 *
 * @module
 */
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import type { InferenceBackend, LoadedModel } from 'lia/engine';
import type { LoadOptions, MemoryEstimate } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { onnxFormat } from './format.js';
import { readLayout, type OnnxDtype } from './layout.js';
import { heldBytes } from './memory.js';
import { loadCrossEncoder } from './cross-encoder.js';
import { loadEncoder } from './model.js';
import { loadInThread, runsInThread } from './speech-worker.js';

/** How the backend picks weights and threads. */
export interface TransformersBackendOptions {
  /** Weights variant; `auto` takes fp32 `model.onnx` (a Whisper's `encoder_model.onnx` and `decoder_model_merged.onnx`) when present, else q8 `model_quantized.onnx`. */
  dtype: OnnxDtype | 'auto';
  /** onnxruntime intra-op threads; 0 takes every core the process may use. */
  threads: number;
  /** Most padded tokens in one forward pass. */
  maxBatchTokens: number;
  /** Keep onnxruntime's CPU memory arena between passes. */
  memoryArena: boolean;
}

/** The backend's name in `hooks.backends` and in logs. */
export const BACKEND_NAME = 'transformers';

/**
 * Threads for one model: the option when set, else every core the process may use. The engine's
 * `LoadOptions.threads` is deliberately not followed: it is sized for llama.cpp, whose threads
 * spin on barriers (1 thread on 2 cores), while onnxruntime's threads here do not spin and an
 * encoder pass gains from every core (bench/results/2026-11-27-code-notes.md).
 */
export function threadsFor(option: number, cores = os.availableParallelism()): number {
  return option > 0 ? option : Math.max(1, cores);
}

/** What each head is, for the load's log line. */
const KINDS = {
  encoder: 'embedding',
  'cross-encoder': 'reranking',
  ctc: 'speech recognition',
  whisper: 'speech recognition',
  moonshine: 'speech recognition',
  vits: 'text-to-speech',
} as const;

/** Creates the backend; `log` receives one line per load. */
export function createTransformersBackend(options: TransformersBackendOptions, log?: FastifyBaseLogger): InferenceBackend {
  return {
    name: BACKEND_NAME,
    formats: [onnxFormat],

    async estimateMemory(model: ResolvedModel): Promise<MemoryEstimate> {
      const layout = await readLayout(model.modelPath, options.dtype, model.name);
      return { totalBytes: heldBytes(layout, options.maxBatchTokens), vramBytes: 0 };
    },

    async load(model: ResolvedModel, load: LoadOptions): Promise<LoadedModel> {
      const started = performance.now();
      const layout = await readLayout(model.modelPath, options.dtype, model.name);
      const threads = threadsFor(options.threads);
      const settings = {
        threads,
        maxBatchTokens: options.maxBatchTokens,
        memoryArena: options.memoryArena,
        sizeBytes: heldBytes(layout, options.maxBatchTokens),
      };
      const { head } = layout;
      // A speech model runs in a worker thread of its own, so its passes leave the event loop free (speech-worker.ts).
      const loaded = runsInThread(head)
        ? await loadInThread(model, layout, settings, log, load.onExit)
        : head.kind === 'cross-encoder'
          ? await loadCrossEncoder(model, layout, head.labels, settings)
          : await loadEncoder(model, layout, settings);
      const ms = Math.round(performance.now() - started);
      log?.info({ model: model.name, weights: layout.weightsFiles, dtype: layout.dtype, threads, ms }, `loaded ONNX ${KINDS[head.kind]} model`);
      return loaded;
    },
  };
}
