/**
 * The `llama-server` inference backend: each loaded model is a {@link LlamaServer} process, which
 * it talks to with the `openai-wire` plugin's codec (`/v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings`), the same translation backend-upstream speaks to remote engines. It runs GGUF
 * models with the `gguf` plugin's handler (`runs: ['gguf']`: backend-llama-cpp, where it is
 * enabled, stays the format's own backend; without it this one is). Where its binary is built and
 * passes the probe it is the default engine of GGUF text and rerankers (`prefers: ['completion',
 * 'rerank']`); it also gets the models that need `vision` (which node-llama-cpp does not serve)
 * and any model the `backends` configuration gives it.
 *
 * What the OpenAI wire cannot carry is done with llama-server's own endpoints, so a request asks
 * the same of both GGUF engines: Ollama's generate (`context`, request templates: generate.ts),
 * an answer under the plan's schema (constrained.ts: output formats and forced tool calls).
 *
 * This file holds the backend and its `load`: the memory estimate, the server's command line and
 * its start, clamped to the trained context. The loaded model is served-model.ts; slot placement
 * and prompt copying are slots.ts; how a model without a chat template of
 * its own is prompted, prompting.ts.
 *
 * @module
 */
import { rm } from 'node:fs/promises';
import type { InferenceBackend, LoadedModel } from 'lia/engine';
import type { LoadOptions, MemoryEstimate } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { promptingOf } from './prompting.js';
import { ServerRanker } from './ranking.js';
import { ServedModel } from './served-model.js';
import { LlamaServer, type ServerSpec } from './server.js';
import { privateDir } from './temp-dirs.js';
import { backendEnv, listDevices, type GpuBackend } from './devices.js';

export interface LlamaServerBackendOptions {
  /** Resolves the binary, or throws the error that says how to get it. */
  binary: () => Promise<string>;
  /** Whether the binary is there to run (asked before a reranker comes here by preference). Defaults to always. */
  available?: () => Promise<boolean>;
  batchSize: number;
  startTimeoutMs: number;
  /** More llama-server arguments for every server, after LIA's own. Defaults to none. */
  args?: readonly string[];
  /**
   * What a model holds once loaded (weights, projector, KV cache, batch buffers): the format
   * handler's `footprint`, which the plugin looks up for the model's format. Without one (a
   * handler that does not estimate), the weights plus {@link FLAT_CACHE_BYTES}.
   */
  footprint?: (model: ResolvedModel, options: LoadOptions) => Promise<number> | undefined;
  /**
   * The chat template the model's weights carry, null when none: the format handler's
   * `chatTemplate`. Without it (a handler that cannot say), the weights are taken to carry one.
   */
  chatTemplate?: (model: ResolvedModel) => Promise<string | null> | undefined;
  /**
   * The GPU back end servers load (devices.ts), or null to run on the CPU: what the plugin's
   * `gpu` option chose for this binary. Throws the error that says what to install when the
   * configured one is missing. Defaults to the CPU.
   */
  gpu?: (binary: string) => Promise<GpuBackend | null>;
}

/** A server process's own memory beyond its model's footprint (the binary, its HTTP threads, slot bookkeeping), with a margin. */
export const SERVER_OVERHEAD_BYTES = 32 * 1024 * 1024;
/** The cache allowance when the format cannot say (see {@link LlamaServerBackendOptions.footprint}). */
const FLAT_CACHE_BYTES = 256 * 1024 * 1024;

/** The backend, and the servers it runs (for logs and tests). */
export interface LlamaServerBackend extends InferenceBackend {
  /** One entry per running server: the model it serves and its process id. */
  processes(): Array<{ model: string; pid: number | undefined }>;
}

export function llamaServerBackend(o: LlamaServerBackendOptions): LlamaServerBackend {
  const running = new Map<LlamaServer, string>();
  const estimate = async (model: ResolvedModel, options: LoadOptions): Promise<MemoryEstimate> => {
    // The store counts the projector in `sizeBytes`.
    const bytes = (await o.footprint?.(model, { ...options, batchSize: options.batchSize ?? o.batchSize })) ?? model.sizeBytes + FLAT_CACHE_BYTES;
    return { totalBytes: bytes + SERVER_OVERHEAD_BYTES, vramBytes: 0, processBytes: SERVER_OVERHEAD_BYTES };
  };
  return {
    processes: () => [...running].map(([server, model]) => ({ model, pid: server.pid })),
    name: 'llama-server',
    formats: [],
    runs: ['gguf'],
    capabilities: ['vision', 'audio'],
    // Wherever it is built, text generation and ranking run here (docs/decisions.md): several
    // streams and agents at llama-server's throughput; one `/v1/rerank` request scores all of its
    // documents in one batch, where node-llama-cpp's ranking context scores one pair at a time.
    // Embedding models stay with the format's own backend.
    prefers: ['completion', 'rerank'],
    // One server holds every adapter of the weights; each request sets their scales (`lora`).
    adapters: 'request',
    // Speculative decoding with a draft model (--spec-type draft-simple) or n-gram lookup
    // (ngram-simple), up to llama-server's own bound of drafted tokens per step.
    speculation: { kinds: ['draft', 'ngram'], maxDraft: 64 },
    available: async () => (o.available ? o.available() : true),
    estimateMemory: (model, options) => estimate(model, options),
    // The devices of the configured GPU back end, read anew at each load: what is free changes.
    async devices() {
      const binary = await o.binary();
      const gpu = await o.gpu?.(binary);
      return gpu ? listDevices(binary, gpu) : [];
    },
    async load(model: ResolvedModel, options: LoadOptions): Promise<LoadedModel> {
      const binary = await o.binary();
      // The engine's offload plan, carried out: only a plan that names a device loads the GPU back end.
      const offload = options.offload?.device ? options.offload : null;
      const gpu = offload ? await o.gpu?.(binary) : null;
      const embedding = model.capabilities.includes('embedding');
      const rerank = model.capabilities.includes('rerank');
      const batchSize = options.batchSize ?? o.batchSize;
      // Snapshots for copying one slot's prompt into another (generation servers only).
      const slotDir = embedding || rerank ? undefined : await privateDir('slots');
      const prompting = embedding || rerank ? { untemplated: false } : promptingOf(model, await o.chatTemplate?.(model));
      const dropSlotDir = () => (slotDir ? rm(slotDir, { recursive: true, force: true }).catch(() => undefined) : Promise.resolve());
      const spec = (contextPerSlot: number): ServerSpec => ({
        binary,
        model: model.modelPath,
        ...(model.projectorPath ? { projector: model.projectorPath } : {}),
        threads: options.threads,
        // With speculation every step is a batch (the token and its drafts), which llama-server
        // runs on --threads-batch: more threads than the small steps want spin on each other
        // (docs/engine.md, Speculative decoding), so batches get the small-batch count too.
        batchThreads: options.speculation ? options.threads : (options.batchThreads ?? options.threads),
        parallel: options.parallel,
        contextPerSlot,
        batchSize,
        embedding,
        rerank,
        startTimeoutMs: o.startTimeoutMs,
        ...(slotDir ? { slotDir } : {}),
        ...(prompting.chatTemplate !== undefined ? { chatTemplate: prompting.chatTemplate } : {}),
        ...(offload && gpu ? { offload, env: backendEnv(gpu) } : {}),
        ...(options.kvCacheType ? { kvCacheType: options.kvCacheType } : {}),
        ...(options.flashAttention !== undefined ? { flashAttention: options.flashAttention } : {}),
        ...(options.adapters?.length && !embedding && !rerank ? { adapters: options.adapters } : {}),
        ...(options.speculation && !embedding && !rerank ? { speculation: options.speculation } : {}),
        ...(o.args?.length ? { args: o.args } : {}),
      });
      const start = (contextPerSlot: number) =>
        LlamaServer.start(spec(contextPerSlot), (err) => {
          running.delete(server);
          void dropSlotDir();
          options.onExit?.(err);
        });
      let server: LlamaServer;
      try {
        server = await start(options.contextLength ?? 0);
        // Clamped to the model's trained context, as node-llama-cpp does (the engine's context
        // growth then stops there and says so); the trained length is known once the model loads.
        if (server.trainedContext > 0 && server.contextPerSlot > server.trainedContext) {
          await server.stop();
          server = await start(server.trainedContext);
        }
      } catch (err) {
        await dropSlotDir();
        throw err;
      }
      running.set(server, model.name);
      const { totalBytes } = await estimate(model, { ...options, contextLength: server.contextPerSlot, parallel: server.slots });
      const served = new ServedModel(
        model,
        server,
        totalBytes,
        embedding,
        prompting.untemplated,
        slotDir,
        async () => {
          running.delete(server);
          await dropSlotDir();
        },
        embedding || rerank ? [] : (options.adapters ?? []),
      );
      if (!embedding && !rerank) served.speculation = options.speculation;
      if (offload && gpu) served.vramBytes = Math.min(offload.vramBytes, totalBytes);
      // A generation model embeds through a second server on the same weights, started at its
      // first embedding request (see ServedModel.embed), on the CPU: a GPU would hold a second
      // copy of the weights for it, where on the CPU both processes map the same file. Its memory
      // counts in the model's from then on: its cache and buffers for one slot and its process,
      // and the weights too where the model itself holds them on a GPU.
      if (!embedding && !rerank) {
        const {
          projector: _projector,
          slotDir: _slotDir,
          chatTemplate: _template,
          offload: _offload,
          env: _env,
          adapters: _adapters,
          speculation: _speculation,
          ...base
        } = spec(server.contextPerSlot);
        served.startEmbedder = async () => {
          const own = await estimate(model, { ...options, contextLength: server.contextPerSlot, parallel: 1, batchSize: server.contextPerSlot });
          const bytes = Math.max(SERVER_OVERHEAD_BYTES, own.totalBytes - Math.max(0, model.sizeBytes - served.vramBytes));
          const embedder = await LlamaServer.start({ ...base, parallel: 1, batchSize: server.contextPerSlot, embedding: true, pooling: 'last' }, () =>
            served.dropEmbedder(),
          );
          return { server: embedder, bytes };
        };
      }
      // A pair is evaluated in one batch: at most the context per slot and the batch size.
      if (rerank) served.ranker = new ServerRanker(server, model.details.family, Math.min(server.contextPerSlot || batchSize, batchSize));
      return served;
    },
  };
}
