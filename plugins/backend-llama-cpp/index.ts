/**
 * Plugin "backend-llama-cpp": registers the llama.cpp inference backend for GGUF models. It is the
 * only module of the appliance that imports node-llama-cpp; the engine plugin drives it through the
 * `InferenceBackend` contract of `plugins/engine/contracts/backend.ts`. The GGUF format it serves is the
 * `gguf` plugin's (its handler, templates and estimate), which it requires.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { LlamaCppBackend } from './backend.js';

export default definePlugin({
  name: 'backend-llama-cpp',
  apiVersion: 2,
  description: 'GGUF generation and embeddings with llama.cpp (node-llama-cpp), one runner process per model',
  dependencies: ['engine', 'gguf'],
  requires: ['gguf'],
  options: Type.Object({
    gpu: Type.Union([Type.Literal('auto'), Type.Literal(false)], {
      default: 'auto',
      description: 'Use CUDA or Vulkan when a prebuilt binary works ("auto"), or the CPU only (false). Defaults to "auto".',
    }),
    prewarm: Type.Boolean({
      default: true,
      description:
        'Keep one spare runner with the bindings loaded, so loads and crash recovery are fast (only while GGUF text models run here by default: not where llama-server is built, nor when `backends` gives the format to another engine). Defaults to true.',
    }),
    cpuAffinity: Type.Union([Type.Literal('auto'), Type.Literal('off')], {
      default: 'off',
      description:
        'Bind each model runner to CPUs of its own (the last free ones, never the first) when the machine has more CPUs than inference threads ("auto"), or leave placement to the kernel ("off"). Defaults to "off".',
    }),
    hugePages: Type.Union([Type.Literal('auto'), Type.Literal('off')], {
      default: 'auto',
      description:
        'Start model runners with glibc asking for transparent huge pages for the large blocks it allocates ("auto": llama.cpp\'s buffers, and the sampler node-llama-cpp allocates for every request, see docs/engine.md), or leave their environment alone ("off"). Defaults to "auto".',
    }),
    batchSize: Type.Integer({
      minimum: 16,
      maximum: 8192,
      default: 512,
      description: 'Prompt tokens evaluated per decode. Defaults to 512.',
    }),
  }),
  env: { LIA_LLAMA_GPU: 'gpu', LIA_BATCH_SIZE: 'batchSize', LIA_LLAMA_PREWARM: 'prewarm', LIA_CPU_AFFINITY: 'cpuAffinity', LIA_HUGE_PAGES: 'hugePages' },
  async setup(app, ctx) {
    const { gpu, batchSize, prewarm, cpuAffinity, hugePages } = ctx.options;
    const { format } = ctx.hooks.extensions.get('gguf');
    const backend = new LlamaCppBackend({ log: ctx.log, format, gpu, batchSize, prewarm, cpuAffinity, hugePages });
    ctx.hooks.extensions.get('backends').register(backend, ctx.name);
    // The spare runner only while GGUF text models come here by default: not when `backends`, or
    // a backend that prefers text and is available (llama-server where it is built), takes them
    // (per-model choices leave the rest here, and keep it).
    app.addHook('onReady', async () => {
      const text = { name: '', format: 'gguf', capabilities: ['completion'] } as const;
      const serves = await ctx.hooks.extensions
        .get('backends')
        .forModel(text)
        .then(
          (chosen) => chosen === backend,
          () => false,
        );
      if (serves) backend.prewarm();
    });
    app.addHook('onClose', () => backend.close());
  },
});
