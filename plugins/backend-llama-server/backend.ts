/**
 * The `llama-server` inference backend: each loaded model is a {@link LlamaServer} process, which
 * it talks to with the `openai-wire` plugin's codec (`/v1/chat/completions`, `/v1/completions`,
 * `/v1/embeddings`), the same translation backend-upstream speaks to remote engines. It runs GGUF
 * models with the handler backend-llama-cpp declares (`runs: ['gguf']`: backend-llama-cpp stays
 * the format's own backend, which reads and describes the files). Where its binary is built and
 * passes the probe it is the default engine of GGUF text and rerankers (`prefers: ['completion',
 * 'rerank']`); it also gets the models that need `vision` (which node-llama-cpp does not serve)
 * and any model the `backends` configuration gives it.
 *
 * What the OpenAI wire cannot carry is done with llama-server's own endpoints, so a request asks
 * the same of both GGUF engines: Ollama's generate (`context`, request templates: generate.ts),
 * an answer under the plan's schema (constrained.ts: output formats and forced tool calls). Slot
 * placement and prompt copying are slots.ts and {@link ServedModel}.
 *
 * @module
 */
import { rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { Errors } from 'lia/plugin';
import type { InferenceBackend, LoadedModel } from 'lia/plugin';
import type {
  ChatParams,
  EmbedParams,
  EmbedResult,
  GenerateParams,
  GenerationEvent,
  LoadOptions,
  MemoryEstimate,
  ResolvedModel,
  SamplingOptions,
} from 'lia/plugin/contracts';
import type { RankParams, RankResult, TokenizeParams, TokenizeResult } from 'lia/plugin/contracts';
import { familyJinjaTemplate, goTemplateFamily } from 'lia/gguf';
import { openaiWire, streamLines, type WireCall } from 'lia/openai-wire';
import { constrained, promptLength } from './constrained.js';
import { embedOn } from './embeddings.js';
import { generateOn, type RunCall } from './generate.js';
import { detokenize, ServerRanker, tokenize } from './ranking.js';
import { LlamaServer, type ServerSpec } from './server.js';
import { privateDir } from './temp-dirs.js';
import { commonPrefix, MIN_SHARED_CHARS, SERIAL_PROMPT_CHARS, SlotTable, type Slot } from './slots.js';

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
}

/**
 * How a model without a chat template of its own is prompted, as node-llama-cpp prompts it: in
 * the chat format its store template names (`chatTemplate`), or, with no store template at all,
 * with generate's prompt passed through as it is (`untemplated`: Ollama's default template is
 * `{{ .Prompt }}`) and chat in llama.cpp's ChatML.
 */
export interface Prompting {
  chatTemplate?: string;
  untemplated: boolean;
}

/** The {@link Prompting} of `model`, whose weights carry `own` (null: no chat template; undefined: not known, taken as one). */
export function promptingOf(model: ResolvedModel, own: string | null | undefined): Prompting {
  if (own !== null) return { untemplated: false };
  const store = model.template?.trim() ? model.template : undefined;
  if (!store) return { untemplated: true };
  const family = goTemplateFamily(store);
  return family ? { chatTemplate: familyJinjaTemplate(family), untemplated: false } : { untemplated: false };
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
    return { totalBytes: bytes + SERVER_OVERHEAD_BYTES, vramBytes: 0 };
  };
  return {
    processes: () => [...running].map(([server, model]) => ({ model, pid: server.pid })),
    name: 'llama-server',
    formats: [],
    runs: ['gguf'],
    capabilities: ['vision'],
    // Wherever it is built, text generation and ranking run here (docs/decisions.md): several
    // streams and agents at llama-server's throughput; one `/v1/rerank` request scores all of its
    // documents in one batch, where node-llama-cpp's ranking context scores one pair at a time.
    // Embedding models stay with the format's own backend.
    prefers: ['completion', 'rerank'],
    available: async () => (o.available ? o.available() : true),
    estimateMemory: (model, options) => estimate(model, options),
    async load(model: ResolvedModel, options: LoadOptions): Promise<LoadedModel> {
      const binary = await o.binary();
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
        batchThreads: options.batchThreads ?? options.threads,
        parallel: options.parallel,
        contextPerSlot,
        batchSize,
        embedding,
        rerank,
        startTimeoutMs: o.startTimeoutMs,
        ...(slotDir ? { slotDir } : {}),
        ...(prompting.chatTemplate !== undefined ? { chatTemplate: prompting.chatTemplate } : {}),
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
      const served = new ServedModel(model, server, totalBytes, embedding, prompting.untemplated, slotDir, async () => {
        running.delete(server);
        await dropSlotDir();
      });
      // A generation model embeds through a second server on the same weights, started at its
      // first embedding request (see ServedModel.embed).
      if (!embedding && !rerank) {
        const { projector: _projector, slotDir: _slotDir, chatTemplate: _template, ...base } = spec(server.contextPerSlot);
        served.startEmbedder = () =>
          LlamaServer.start({ ...base, parallel: 1, batchSize: server.contextPerSlot, embedding: true, pooling: 'last' }, () => served.dropEmbedder());
      }
      // A pair is evaluated in one batch: at most the context per slot and the batch size.
      if (rerank) served.ranker = new ServerRanker(server, model.details.family, Math.min(server.contextPerSlot || batchSize, batchSize));
      return served;
    },
  };
}

/** A slot snapshot shared by the requests that copy the same donor at once. */
interface Snapshot {
  file: string;
  /** The donor's prompt when it was saved. */
  key: string;
  saved: Promise<void>;
  users: number;
}

/** What a priming request ({@link ServedModel}'s `#prime`) found cached and how long it evaluated. */
interface Primed {
  cached: number;
  promptEvalNs: number;
}

/** A model as one llama-server serves it. */
class ServedModel implements LoadedModel {
  readonly capabilities;
  readonly contextLength: number;
  readonly sizeBytes: number;
  readonly vramBytes = 0;
  /** Set for a reranker (a server started with `--rerank`). */
  ranker: ServerRanker | null = null;
  readonly #slots: SlotTable;
  readonly #snapshots = new Map<Slot, Snapshot>();
  /** Settles when the last long prompt queued ({@link #queuePrompt}) has been evaluated. */
  #promptLine: Promise<void> = Promise.resolve();
  #files = 0;

  constructor(
    readonly model: ResolvedModel,
    readonly server: LlamaServer,
    sizeBytes: number,
    readonly embedding: boolean,
    /** Neither the weights nor the store has a template: generate passes its prompt through ({@link Prompting}). */
    readonly untemplated: boolean,
    readonly slotDir: string | undefined,
    readonly forget: () => Promise<void>,
  ) {
    // The model's own capabilities; vision only where the projector loaded.
    this.capabilities = model.capabilities.filter((c) => c !== 'vision' || server.vision);
    this.contextLength = server.contextPerSlot;
    this.sizeBytes = sizeBytes;
    this.#slots = new SlotTable(server.slots);
  }

  generate(p: GenerateParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const run: RunCall = (build) =>
      this.#stream(
        () => {
          const call = withNativeSampling(build(), p.options);
          // A templated prompt is a chat turn: thinking switched off as for chat.
          if (p.think === false && call.path === '/v1/chat/completions') call.body['chat_template_kwargs'] = { enable_thinking: false };
          return call;
        },
        p.logprobs,
        signal,
      );
    return generateOn(this.server, this.model.name, p, run, signal, this.untemplated);
  }

  /** A chat; with an answer schema (the engine's plan), a raw completion of the rendered prompt under it (constrained.ts). */
  chat(p: ChatParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    if (p.constraint) {
      const { constraint } = p;
      const run: RunCall = (build) => this.#stream(() => withNativeSampling(build(), p.options), p.logprobs, signal);
      return constrained(this.server, this.model.name, p, constraint, run, signal);
    }
    return this.#stream(
      () => {
        const call = withNativeSampling(openaiWire.chat(this.model.name, p), p.options);
        // Thinking switched off in the prompt where the template can (Qwen3's `enable_thinking`).
        if (p.think === false) call.body['chat_template_kwargs'] = { enable_thinking: false };
        return call;
      },
      p.logprobs,
      signal,
    );
  }

  /** The prompt's length as the server evaluates it: rendered by the model's template, counted by its tokenizer (BOS included). */
  countChatTokens(p: ChatParams, signal: AbortSignal): Promise<number> {
    return promptLength(this.server, this.model.name, p, signal);
  }

  /** The events of one request; `build` runs at the first step, so its 400s reach the consumer as the stream's error. */
  async *#stream(build: () => WireCall, logprobs: number | undefined, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const call = build();
    const started = process.hrtime.bigint();
    // Ends the request when the consumer stops early (the client went away, a stop sequence).
    const own = new AbortController();
    const sig = AbortSignal.any([signal, own.signal]);
    const key = promptKey(call);
    const shareable = !key.includes('"image_url"') && this.slotDir !== undefined;
    const placed = this.#slots.acquire(key, shareable);
    let evaluated = false;
    let primed: Primed | undefined;
    let gate: { turn: Promise<void>; done: () => void } | undefined;
    try {
      if (placed) {
        let holds = placed.held;
        if (placed.donor) holds = await this.#copy(placed.donor, placed.slot, placed.held, key, sig);
        else if (this.#slots.size > 1 && shareable && key.length - placed.held >= MIN_SHARED_CHARS && placed.held * 2 < key.length) {
          // A new conversation's long prompt (its slot held less than half of it), which others may share.
          primed = await this.#prime(call, placed.slot, sig);
          holds = key.length;
        }
        if (this.#slots.size > 1 && key.length - holds >= SERIAL_PROMPT_CHARS) {
          gate = this.#queuePrompt();
          await Promise.race([gate.turn, aborted(sig)]);
        }
        call.body['id_slot'] = placed.slot.id;
        call.body['cache_prompt'] = true;
      }
      const res = await this.server.send('POST', call.path, call.body, sig);
      try {
        for await (const event of openaiWire.events(streamLines(res.body), started, logprobs)) {
          if (!evaluated && placed) this.#slots.evaluated(placed.slot);
          gate?.done();
          evaluated = true;
          // What the client is told is the prompt's evaluation, priming included.
          if (event.type === 'done' && primed) {
            yield { ...event, cachedTokens: primed.cached, promptEvalNs: event.promptEvalNs + primed.promptEvalNs };
            continue;
          }
          yield event;
        }
      } catch (err) {
        if (sig.aborted) throw signal.reason ?? err;
        if ((err as { code?: string }).code === 'LIA_ERR_BAD_GATEWAY' || !(err as { statusCode?: number }).statusCode) {
          throw Errors.engineFailed(`llama-server broke off its answer: ${(err as Error).message}`);
        }
        throw err;
      }
    } finally {
      own.abort();
      gate?.done();
      if (placed) this.#slots.release(placed.slot, evaluated);
    }
  }

  /**
   * A place in the line of long prompts: `turn` settles once every long prompt queued before has
   * been evaluated (its first event) or ended; call `done` when this one has. Several prompts sent
   * together share each decode and all wait for the last of them; one after another, the first
   * answers after its own evaluation, the next after two, and conversations that arrived together
   * fall out of step instead of meeting again at every turn.
   */
  #queuePrompt(): { turn: Promise<void>; done: () => void } {
    const turn = this.#promptLine;
    let done!: () => void;
    this.#promptLine = new Promise<void>((resolve) => (done = resolve));
    return { turn, done };
  }

  /**
   * Evaluates a long prompt that no slot holds (a new conversation's: not a turn that continues
   * its slot, which nobody else shares) on its own first (`n_predict: 0`), so that the slot
   * is idle once the prompt is in its cache: requests that share the prompt's beginning and arrive
   * meanwhile copy it then ({@link #copy} saves a slot only while it is idle), before this request
   * takes the slot again to generate, evaluating one token anew. Costs one round trip per such
   * prompt, and saves each conversation arriving together the evaluation of what they share.
   */
  async #prime(call: WireCall, slot: Slot, signal: AbortSignal): Promise<Primed> {
    const { stream: _stream, stream_options: _options, ...body } = call.body;
    const answer = (await this.server.fetchJson('POST', call.path, { ...body, stream: false, n_predict: 0, id_slot: slot.id, cache_prompt: true }, signal)) as {
      usage?: { prompt_tokens_details?: { cached_tokens?: number } };
      timings?: { cache_n?: number; prompt_ms?: number };
    };
    this.#slots.evaluated(slot);
    // Requests waiting for this prompt start their snapshot now; the slot stays idle until it is saved.
    await new Promise((resolve) => setImmediate(resolve));
    await this.#snapshots.get(slot)?.saved.catch(() => undefined);
    return {
      cached: answer.usage?.prompt_tokens_details?.cached_tokens ?? answer.timings?.cache_n ?? 0,
      promptEvalNs: Math.round((answer.timings?.prompt_ms ?? 0) * 1e6),
    };
  }

  /**
   * Copies `donor`'s state into `slot` once the donor's prompt is evaluated, when it still holds
   * enough more of `key` than the `held` characters the slot had. Requests copying the same donor at once share one snapshot file,
   * removed when the last of them has restored it. A failed copy only costs the evaluation.
   */
  async #copy(donor: Slot, slot: Slot, held: number, key: string, signal: AbortSignal): Promise<number> {
    await Promise.race([donor.evaluated, aborted(signal)]);
    const shared = commonPrefix(donor.key, key);
    if (shared < held + MIN_SHARED_CHARS) return held;
    let snap = this.#snapshots.get(donor);
    const fresh = !snap || snap.key !== donor.key;
    if (!snap || fresh) {
      const file = `slot${donor.id}-${++this.#files}.bin`;
      const made: Snapshot = { file, key: donor.key, saved: Promise.resolve(), users: 0 };
      snap = made;
      this.#snapshots.set(donor, made);
    }
    const current = snap;
    current.users++;
    try {
      if (fresh) current.saved = this.server.saveSlot(donor.id, current.file, signal);
      await current.saved;
      await this.server.restoreSlot(slot.id, current.file, signal);
      return shared;
    } catch (err) {
      if (signal.aborted) throw err;
      // The request goes on and evaluates its prompt; the next copy saves afresh.
      if (this.#snapshots.get(donor) === current) this.#snapshots.delete(donor);
      return held;
    } finally {
      if (--current.users === 0) {
        if (this.#snapshots.get(donor) === current) this.#snapshots.delete(donor);
        if (this.slotDir) await unlink(path.join(this.slotDir, current.file)).catch(() => undefined);
      }
    }
  }

  /** Starts the embedding server of a generation model; unset for an embedding model or a reranker. */
  startEmbedder: (() => Promise<LlamaServer>) | undefined;
  #embedder: Promise<LlamaServer> | undefined;

  /** Forgets the embedding server (it exited): the next embedding request starts another. */
  dropEmbedder(): void {
    this.#embedder = undefined;
  }

  /**
   * Embeddings: an embedding model's from its own server; a generation model's, as node-llama-cpp
   * and Ollama serve them, from a second server on the same weights (one slot of the same context,
   * the last token's state), started at the first request and stopped with the model.
   */
  async embed(p: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    let server = this.server;
    if (!this.embedding) {
      if (!this.startEmbedder) throw Errors.badRequest(`"${this.model.name}" does not support embedding`);
      if (!this.#embedder) {
        this.#embedder = this.startEmbedder();
        this.#embedder.catch(() => this.dropEmbedder());
      }
      server = await this.#embedder;
    }
    return embedOn(server, p, signal);
  }

  async rank(p: RankParams, signal: AbortSignal): Promise<RankResult> {
    if (!this.ranker) throw Errors.badRequest(`"${this.model.name}" does not support rerank`);
    return this.ranker.rank(p, signal);
  }

  tokenize(p: TokenizeParams, signal: AbortSignal): Promise<TokenizeResult> {
    return tokenize(this.server, p, signal);
  }

  detokenize(tokens: number[], signal: AbortSignal): Promise<string> {
    return detokenize(this.server, tokens, signal);
  }

  async unload(): Promise<void> {
    const embedder = this.#embedder;
    this.#embedder = undefined;
    await Promise.all([this.server.stop(), embedder?.then((e) => e.stop()).catch(() => undefined)]);
    await this.forget();
  }
}

/**
 * What llama-server reads under its own names: the repeat penalty and its window on every route
 * (the OpenAI wire's `repetition_penalty`, vLLM's name, is not one of them), the stop sequence
 * that ended the text (its `verbose` answer).
 */
function withNativeSampling(call: WireCall, o: SamplingOptions): WireCall {
  if (o.repeat_penalty !== undefined) {
    delete call.body['repetition_penalty'];
    call.body['repeat_penalty'] = o.repeat_penalty;
  }
  if (o.repeat_last_n !== undefined) call.body['repeat_last_n'] = o.repeat_last_n;
  if (o.stop?.length) {
    // Which stop sequence ended the text (Anthropic's `stop_sequence`): llama-server's debug field,
    // trimmed to that one value.
    call.body['verbose'] = true;
    call.body['response_fields'] = ['stopping_word'];
  }
  return call;
}

/** Rejects with the signal's reason once it aborts (marked handled: a race may have settled long before). */
function aborted(signal: AbortSignal): Promise<never> {
  const p = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  p.catch(() => undefined);
  return p;
}

/**
 * What of a request the server renders into its prompt, as canonical JSON with the messages (or
 * the raw prompt) last: the text slot placement compares (slots.ts).
 */
function promptKey(call: WireCall): string {
  const b = call.body;
  return JSON.stringify([call.path, b['chat_template_kwargs'] ?? null, b['tools'] ?? null, b['grammar'] ?? null, b['messages'] ?? b['prompt'] ?? null]);
}
