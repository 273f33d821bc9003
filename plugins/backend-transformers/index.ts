/**
 * The `backend-transformers` plugin: sentence embeddings, reranking and speech recognition (CTC,
 * Whisper and Moonshine) from ONNX models (the Hugging Face ONNX layout) with transformers.js on
 * onnxruntime-node, CPU. It registers one backend for the `onnx` format in `hooks.backends`; the
 * engine routes `/api/embed`, `/api/embeddings` and (through the OpenAI plugin)
 * `/v1/embeddings`, `/v1/rerank` and `/v1/audio/*` to it by the model's format. Nothing is ever
 * fetched from a hub, and the library is imported on the first load only. Disable the plugin and
 * ONNX models answer a clear 400 while GGUF embeddings keep working. See docs/embeddings.md,
 * docs/rerank.md and docs/audio.md.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { createTransformersBackend } from './backend.js';
import { DTYPE_FILES } from './layout.js';

const Options = Type.Object(
  {
    /**
     * Which weights file of a model folder to run: `auto` takes fp32 `onnx/model.onnx` when the
     * folder has it, else q8 `onnx/model_quantized.onnx`, else the first other variant found (a
     * Whisper's or Moonshine's `encoder_model` and `decoder_model_merged` files, both of one variant);
     * any other value names one variant, and a folder without it fails to load naming the file.
     * Defaults to `auto`.
     */
    dtype: Type.Union([Type.Literal('auto'), ...Object.keys(DTYPE_FILES).map((k) => Type.Literal(k))], {
      default: 'auto',
    }),
    /**
     * onnxruntime intra-op threads per model; 0 takes every core the process may use (the
     * threads do not spin, so they leave the cores free between passes). Defaults to 0.
     */
    threads: Type.Integer({ minimum: 0, maximum: 256, default: 0 }),
    /**
     * Most padded tokens in one forward pass (inputs × longest input). A request that needs more
     * is split into passes of similar lengths. Bounds the memory of a pass. Defaults to 4096.
     */
    maxBatchTokens: Type.Integer({ minimum: 512, maximum: 1_048_576, default: 4096 }),
    /**
     * Keep onnxruntime's CPU memory arena: passes reuse their buffers (~10% more throughput on 2
     * cores), and the memory of the largest pass stays held until the model unloads (the memory
     * estimate counts it either way). False gives it back after every pass. Defaults to true.
     */
    memoryArena: Type.Boolean({ default: true }),
  },
  { additionalProperties: false },
);

export default definePlugin({
  name: 'backend-transformers',
  dependencies: ['engine'],
  apiVersion: 2,
  description: 'ONNX embeddings, reranking and speech recognition with transformers.js (onnxruntime-node, CPU)',
  options: Options,
  env: {
    LIA_ONNX_DTYPE: 'dtype',
    LIA_ONNX_THREADS: 'threads',
    LIA_ONNX_MAX_BATCH_TOKENS: 'maxBatchTokens',
    LIA_ONNX_MEMORY_ARENA: 'memoryArena',
  },
  setup(_app, ctx) {
    const { dtype, ...rest } = ctx.options;
    const options = { dtype: dtype as keyof typeof DTYPE_FILES | 'auto', ...rest };
    ctx.hooks.extensions.get('backends').register(createTransformersBackend(options, ctx.log), ctx.name);
  },
});
