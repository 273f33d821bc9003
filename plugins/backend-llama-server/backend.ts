/**
 * The `llama-server` inference backend: each loaded model is a {@link LlamaServer} process, which
 * it talks to with `lia/utils`' OpenAI wire codec (`/v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings`), the same translation backend-upstream speaks to remote engines. It runs GGUF
 * models with the handler backend-llama-cpp declares (`runs: ['gguf']`), so it is never the
 * format's default: the registry sends it a model that needs `vision` (which node-llama-cpp does
 * not serve), and any model the `backends` configuration gives it.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { InferenceBackend, LoadedModel } from 'lia/plugin';
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent, LoadOptions, MemoryEstimate, ResolvedModel } from 'lia/plugin/contracts';
import { openaiWire, streamLines, type WireCall } from 'lia/utils';
import { LlamaServer } from './server.js';

export interface LlamaServerBackendOptions {
  /** Resolves the binary, or throws the error that says how to get it. */
  binary: () => Promise<string>;
  batchSize: number;
  startTimeoutMs: number;
}

/**
 * What a server holds beyond the weights (its KV cache, compute buffers, the process): a flat
 * allowance, as the KV cache's size per token is not known without reading the model's header.
 */
const RUNTIME_BYTES = 256 * 1024 * 1024;

/** The backend, and the servers it runs (for logs and tests). */
export interface LlamaServerBackend extends InferenceBackend {
  /** One entry per running server: the model it serves and its process id. */
  processes(): Array<{ model: string; pid: number | undefined }>;
}

export function llamaServerBackend(o: LlamaServerBackendOptions): LlamaServerBackend {
  const running = new Map<LlamaServer, string>();
  return {
    processes: () => [...running].map(([server, model]) => ({ model, pid: server.pid })),
    name: 'llama-server',
    formats: [],
    runs: ['gguf'],
    capabilities: ['vision'],
    async estimateMemory(model: ResolvedModel): Promise<MemoryEstimate> {
      // The store counts the projector in `sizeBytes`.
      return { totalBytes: model.sizeBytes + RUNTIME_BYTES, vramBytes: 0 };
    },
    async load(model: ResolvedModel, options: LoadOptions): Promise<LoadedModel> {
      const binary = await o.binary();
      const embedding = model.capabilities.includes('embedding');
      const server = await LlamaServer.start(
        {
          binary,
          model: model.modelPath,
          ...(model.projectorPath ? { projector: model.projectorPath } : {}),
          threads: options.threads,
          batchThreads: options.batchThreads ?? options.threads,
          parallel: options.parallel,
          contextPerSlot: options.contextLength ?? 0,
          batchSize: options.batchSize ?? o.batchSize,
          embedding,
          startTimeoutMs: o.startTimeoutMs,
        },
        (err) => {
          running.delete(server);
          options.onExit?.(err);
        },
      );
      running.set(server, model.name);
      return new ServedModel(model, server, embedding, () => running.delete(server));
    },
  };
}

/** A model as one llama-server serves it. */
class ServedModel implements LoadedModel {
  readonly capabilities;
  readonly contextLength: number;
  readonly sizeBytes: number;
  readonly vramBytes = 0;

  constructor(
    readonly model: ResolvedModel,
    readonly server: LlamaServer,
    readonly embedding: boolean,
    readonly forget: () => void,
  ) {
    // The model's own capabilities; vision only where the projector loaded.
    this.capabilities = model.capabilities.filter((c) => c !== 'vision' || server.vision);
    this.contextLength = server.contextPerSlot;
    this.sizeBytes = model.sizeBytes + RUNTIME_BYTES;
  }

  generate(p: GenerateParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.#stream(() => {
      noLogprobs(p.logprobs);
      return openaiWire.generate(this.model.name, p);
    }, signal);
  }

  chat(p: ChatParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.#stream(() => {
      noLogprobs(p.logprobs);
      const call = openaiWire.chat(this.model.name, p);
      // Thinking switched off in the prompt where the template can (Qwen3's `enable_thinking`).
      if (p.think === false) call.body['chat_template_kwargs'] = { enable_thinking: false };
      return call;
    }, signal);
  }

  /** The events of one request; `build` runs at the first step, so its 400s reach the consumer as the stream's error. */
  async *#stream(build: () => WireCall, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const call = build();
    const started = process.hrtime.bigint();
    // Ends the request when the consumer stops early (the client went away, a stop sequence).
    const own = new AbortController();
    const sig = AbortSignal.any([signal, own.signal]);
    try {
      const res = await this.server.send('POST', call.path, call.body, sig);
      try {
        yield* openaiWire.events(streamLines(res.body), started);
      } catch (err) {
        if (sig.aborted) throw signal.reason ?? err;
        if ((err as { code?: string }).code === 'LIA_ERR_BAD_GATEWAY' || !(err as { statusCode?: number }).statusCode) {
          throw Errors.engineFailed(`llama-server broke off its answer: ${(err as Error).message}`);
        }
        throw err;
      }
    } finally {
      own.abort();
    }
  }

  async embed(p: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    if (!this.embedding) throw Errors.badRequest(`"${this.model.name}" does not support embedding`);
    const call = openaiWire.embed(this.model.name, p);
    const json = await this.server.fetchJson('POST', call.path, call.body, signal);
    return openaiWire.embedResult(json);
  }

  async unload(): Promise<void> {
    this.forget();
    await this.server.stop();
  }
}

/** Log probabilities are not read back from llama-server's answers: a 400 rather than an answer without them. */
function noLogprobs(logprobs: number | undefined): void {
  if (logprobs !== undefined) throw Errors.badRequest('log probabilities are not available from the llama-server backend', { param: 'logprobs' });
}
