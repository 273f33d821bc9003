/**
 * Plugin "engine": the inference engine. It provides `hooks.inference` (the one inference path, also
 * used by the OpenAI translator), implements the `svc-inference` service, and serves Ollama's
 * native inference routes: `/api/generate`, `/api/chat`, `/api/embed`, `/api/embeddings`,
 * `/api/ps`, `/api/version`, and the `/` heartbeat. Models come from the store and run on the backend registered for
 * their format. See docs/engine.md.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { BackendRegistry } from './backend-registry.js';
import { parseKeepAlive } from './keep-alive.js';
import { memoryBudget } from './memory.js';
import { chatRoute } from './routes/chat.js';
import { embedRoutes } from './routes/embed.js';
import { tokenRoutes } from './routes/tokens.js';
import { generateRoute } from './routes/generate.js';
import { heartbeatRoute } from './routes/heartbeat.js';
import { psRoutes } from './routes/ps.js';
import { Scheduler } from './scheduler.js';
import { DEFAULT_MAX_AUDIO_SECONDS } from './audio.js';
import { DEFAULT_MAX_IMAGE_BYTES } from './images.js';
import { EngineService } from './service.js';
import { toObservers } from './admission.js';
import { inferenceBatchThreads, inferenceThreads } from './threads.js';

export default definePlugin({
  name: 'engine',
  apiVersion: 2,
  provides: ['inference', 'backends'],
  requires: ['models'],
  description: 'Inference engine (svc-inference): scheduler, /api/generate, chat, embed, embeddings, ps, version, /tokenize, /detokenize',
  services: [{ name: 'svc-inference', description: 'LIA inference engine (model scheduler and runners)' }],
  options: Type.Object({
    numParallel: Type.Integer({
      minimum: 1,
      maximum: 64,
      default: 4,
      description: 'Concurrent requests (sequences batched together) per loaded model. Defaults to 4.',
    }),
    maxQueue: Type.Integer({
      minimum: 0,
      default: 512,
      description: 'Requests that may wait for a slot or a load; more get 503 with Retry-After. Defaults to 512.',
    }),
    keepAlive: Type.Union([Type.String(), Type.Number()], {
      default: '5m',
      description: 'How long an idle model stays loaded: seconds or a duration ("5m", "1h"); negative = forever. Defaults to "5m".',
    }),
    maxLoadedModels: Type.Integer({ minimum: 1, default: 3, description: 'Models loaded at once. Defaults to 3.' }),
    memoryBudget: Type.Integer({
      minimum: 0,
      default: 0,
      description: 'Bytes loaded models may use together; 0 = 80 % of RAM (or of the cgroup limit). Defaults to 0.',
    }),
    gpuMemoryCap: Type.Integer({
      minimum: 0,
      default: 0,
      description:
        "Bytes of each GPU the loaded models may hold together (Ollama has no such cap; llama-server's --fit-target is per load); 0 = what the device has free. Defaults to 0.",
    }),
    gpuReserve: Type.Integer({
      minimum: 0,
      default: 256 * 1024 * 1024,
      description: "Bytes of each GPU left to its driver and other programs when layers are fitted (Ollama's OLLAMA_GPU_OVERHEAD). Defaults to 256 MiB.",
    }),
    kvCacheType: Type.Union([Type.Literal('f16'), Type.Literal('q8_0'), Type.Literal('q4_0')], {
      default: 'f16',
      description:
        "KV cache element type of a model whose Modelfile names none (PARAMETER kv_cache_type; Ollama's OLLAMA_KV_CACHE_TYPE, llama.cpp's -ctk/-ctv): f16, q8_0 (half the cache memory) or q4_0 (a quarter). A quantized cache needs flash attention: with flashAttention off it is f16. Defaults to f16.",
    }),
    flashAttention: Type.Union([Type.Literal('auto'), Type.Literal('on'), Type.Literal('off')], {
      default: 'auto',
      description:
        "Flash attention for a model whose Modelfile does not set it (PARAMETER flash_attention true|false; Ollama's OLLAMA_FLASH_ATTENTION, llama.cpp's -fa): auto lets llama.cpp decide per device. Defaults to auto.",
    }),
    draftModels: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 }), {
      default: {},
      description:
        'Speculative decoding: a draft model per model, both stored names (e.g. {"llama3:8b": "llama3:1b"}), for models whose Modelfile names no DRAFT; the draft must share the model\'s vocabulary. Defaults to none.',
    }),
    draftNumPredict: Type.Integer({
      minimum: 0,
      maximum: 64,
      default: 3,
      description:
        "Tokens drafted per step in speculative decoding when neither the request nor the model sets draft_num_predict (Ollama's name; llama-server's --spec-draft-n-max), lowered to what the engine drafts; 0 switches speculation off. Defaults to 3.",
    }),
    draftNgram: Type.Integer({
      minimum: 0,
      maximum: 32,
      default: 0,
      description:
        'Speculative decoding by n-gram lookup (drafts from the prompt and the answer so far, for edits that repeat the prompt) for models without a draft model: the n-gram length; 0 = off. Defaults to 0.',
    }),
    contextLength: Type.Integer({
      minimum: 0,
      default: 4096,
      description: "Context length per sequence unless a request sets num_ctx, capped at the model's; 0 = the model's. Defaults to 4096.",
    }),
    threads: Type.Integer({
      minimum: 0,
      maximum: 512,
      default: 0,
      description: 'CPU threads per model; 0 = automatic (1 on ≤ 2 cores, else cores − 1, cgroup-aware). Defaults to 0.',
    }),
    maxImageBytes: Type.Integer({
      minimum: 1024,
      default: DEFAULT_MAX_IMAGE_BYTES,
      description:
        'Largest image a request may carry, in bytes once decoded; a larger one is a 400. The body limit (`bodyLimit`, base64 adds a third) applies first. Defaults to 5242880 (5 MiB).',
    }),
    maxAudioSeconds: Type.Integer({
      minimum: 1,
      maximum: 86_400,
      default: DEFAULT_MAX_AUDIO_SECONDS,
      description:
        'Longest audio a transcription may carry, in seconds once decoded (the samples take 64 KB a second); a longer file is a 400. The upload limit (api-openai `maxAudioBytes`) applies first. Defaults to 3600.',
    }),
    remoteImages: Type.Boolean({
      default: false,
      description:
        "Fetch images that requests name by http(s) URL (at most maxImageBytes, within 10 s). Off, such a URL is a 400: fetching what any key holder names lets them reach hosts on the appliance's network (SSRF). Defaults to false.",
    }),
    batchThreads: Type.Integer({
      minimum: 0,
      maximum: 512,
      default: 0,
      description:
        'CPU threads for batches of 8 or more tokens (prompts, many streams) while one model is loaded; 0 = automatic (all available cores, at least `threads`). Defaults to 0.',
    }),
  }),
  env: {
    LIA_NUM_PARALLEL: 'numParallel',
    LIA_MAX_QUEUE: 'maxQueue',
    LIA_KEEP_ALIVE: 'keepAlive',
    LIA_MAX_LOADED_MODELS: 'maxLoadedModels',
    LIA_MEMORY_BUDGET: 'memoryBudget',
    LIA_GPU_MEMORY_CAP: 'gpuMemoryCap',
    LIA_GPU_RESERVE: 'gpuReserve',
    LIA_CONTEXT_LENGTH: 'contextLength',
    LIA_KV_CACHE_TYPE: 'kvCacheType',
    LIA_FLASH_ATTENTION: 'flashAttention',
    LIA_DRAFT_NUM_PREDICT: 'draftNumPredict',
    LIA_DRAFT_NGRAM: 'draftNgram',
    LIA_THREADS: 'threads',
    LIA_BATCH_THREADS: 'batchThreads',
    LIA_MAX_IMAGE_BYTES: 'maxImageBytes',
    LIA_REMOTE_IMAGES: 'remoteImages',
    LIA_MAX_AUDIO_SECONDS: 'maxAudioSeconds',
  },
  commands: async () => (await import('./cli/commands.js')).commands,
  async setup(app, ctx) {
    const o = ctx.options;
    const threads = inferenceThreads(o.threads);
    const batchThreads = inferenceBatchThreads(o.batchThreads, threads);
    const backends = new BackendRegistry();
    ctx.hooks.extensions.provide('backends', backends, ctx.name);
    // Once every plugin is registered: one backend per model format, as the config's `backends` picks.
    app.addHook('onReady', async () => backends.configure(ctx.config.backends ?? {}, ctx.config.source ?? 'the configuration'));
    const observe = toObservers(ctx.hooks.inferenceObservers.list());
    const scheduler = new Scheduler({
      backends,
      log: ctx.log,
      parallel: o.numParallel,
      maxQueue: o.maxQueue,
      keepAliveMs: parseKeepAlive(o.keepAlive) ?? 5 * 60_000,
      maxLoadedModels: o.maxLoadedModels,
      memoryBudgetBytes: memoryBudget(o.memoryBudget),
      ...(o.gpuMemoryCap > 0 ? { gpuMemoryCapBytes: o.gpuMemoryCap } : {}),
      gpuReserveBytes: o.gpuReserve,
      ...(o.kvCacheType !== 'f16' ? { kvCacheType: o.kvCacheType } : {}),
      ...(o.flashAttention !== 'auto' ? { flashAttention: o.flashAttention === 'on' } : {}),
      contextLength: o.contextLength,
      threads,
      batchThreads,
      observe,
      storedModels: () => ctx.hooks.extensions.get('models').list(),
    });
    const service = new EngineService({ get: () => ctx.hooks.extensions.get('models') }, scheduler, observe);
    service.maxImageBytes = o.maxImageBytes;
    service.remoteImages = o.remoteImages;
    service.audioLimits = { ...service.audioLimits, maxSeconds: o.maxAudioSeconds };
    service.speculation = { draftModels: o.draftModels, draftNumPredict: o.draftNumPredict, draftNgram: o.draftNgram };
    service.backends = backends;
    ctx.hooks.extensions.provide('inference', service, 'engine');
    ctx.hooks.services.implement('svc-inference', {
      async start() {
        service.running = true;
      },
      async stop() {
        service.running = false;
        await scheduler.unloadAll();
      },
    });
    // Once every plugin is set up (the store may be set up after the engine): a model is unloaded
    // before the store deletes it.
    app.addHook('onReady', async () => {
      ctx.hooks.extensions.maybe('models')?.onBeforeDelete(async (model) => scheduler.unload(model.name, true));
    });
    ctx.log.info({ parallel: o.numParallel, threads, batchThreads, maxQueue: o.maxQueue, keepAlive: o.keepAlive }, 'inference engine ready');

    const get = () => service;
    heartbeatRoute(app);
    generateRoute(app, get);
    chatRoute(app, get);
    embedRoutes(app, get);
    tokenRoutes(app, get);
    psRoutes(app, get, (name) => scheduler.loadedModel(name)?.details);
    // The backend plugins are set up after the engine, so their onClose runs before its: the
    // runners stop first (preClose), then every backend's process-wide resources go.
    app.addHook('preClose', async () => {
      service.running = false;
      await scheduler.shutdown();
    });
    app.addHook('onClose', async () => {
      for (const b of backends.list()) await b.close?.();
    });
  },
});
