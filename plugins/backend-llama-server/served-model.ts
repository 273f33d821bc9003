/**
 * A model as one llama-server serves it (the {@link LoadedModel} backend.ts's `load` returns): chat
 * and generate as OpenAI wire calls in llama-server's own sampling names, each run on a slot
 * (slots.ts); embeddings from the model's own server or, for a generation model, from a
 * second one started on first use; ranking and tokens through the server's own endpoints.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AudioInput, LoadedModel, Speculation, TranscribeParams, TranscribeResult } from 'lia/engine';
import type {
  AdapterScale,
  ChatParams,
  EmbedParams,
  EmbedResult,
  GenerateParams,
  GenerationEvent,
  RankParams,
  RankResult,
  SamplingOptions,
  TokenizeParams,
  TokenizeResult,
} from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { openaiWire, type WireCall } from 'lia/openai-wire';
import { constrained, promptLength } from './constrained.js';
import { embedOn } from './embeddings.js';
import { generateOn, type RunCall } from './generate.js';
import { HEARING, heard, hearingChat } from './hearing.js';
import { detokenize, type ServerRanker, tokenize } from './ranking.js';
import type { LlamaServer } from './server.js';
import { SlotRequests } from './slots.js';

/** A model as one llama-server serves it. */
export class ServedModel implements LoadedModel {
  readonly capabilities;
  readonly contextLength: number;
  readonly #sizeBytes: number;
  /** What the offload plan placed on the GPU (0 on the CPU). */
  vramBytes = 0;
  /** Set for a reranker (a server started with `--rerank`). */
  ranker: ServerRanker | null = null;
  /** The LoRA adapters the server holds; each request sets their scales (`lora`). */
  readonly adapters: { readonly loaded: readonly AdapterScale[]; readonly perRequest: true } | undefined;
  /** Set where the projector has an audio encoder: the model transcribes (hearing.ts). */
  readonly audio: AudioInput | undefined;
  /** The speculative decoding the server was started with (`--spec-type`); every answer then reports its drafts. */
  speculation: Speculation | undefined;
  readonly #requests: SlotRequests;

  constructor(
    readonly model: ResolvedModel,
    readonly server: LlamaServer,
    sizeBytes: number,
    readonly embedding: boolean,
    /** Neither the weights nor the store has a template: generate passes its prompt through (prompting.ts). */
    readonly untemplated: boolean,
    /** Where the server saves slot snapshots (a generation server's `--slot-save-path`). */
    slotDir: string | undefined,
    readonly forget: () => Promise<void>,
    adapters: readonly AdapterScale[] = [],
  ) {
    this.adapters = adapters.length > 0 ? { loaded: adapters, perRequest: true } : undefined;
    // The model's own capabilities; vision and audio only where the projector loaded with that encoder.
    this.capabilities = model.capabilities.filter((c) => (c !== 'vision' || server.vision) && (c !== 'audio' || server.audio));
    this.audio = server.audio ? HEARING : undefined;
    this.contextLength = server.contextPerSlot;
    this.#sizeBytes = sizeBytes;
    this.#requests = new SlotRequests(server, slotDir);
  }

  generate(p: GenerateParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const run: RunCall = (build) =>
      this.#requests.run(
        () => {
          const call = this.#withAdapters(withNativeSampling(build(), p.options), p.adapters);
          // A templated prompt is a chat turn: thinking switched off as for chat.
          if (p.think === false && call.path === '/v1/chat/completions') call.body['chat_template_kwargs'] = { enable_thinking: false };
          return call;
        },
        p.logprobs,
        signal,
      );
    return this.#drafts(generateOn(this.server, this.model.name, p, run, signal, this.untemplated));
  }

  /** With speculation, every `done` carries its drafts: llama-server leaves them out of `timings` when it drafted none. */
  #drafts(events: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
    if (!this.speculation) return events;
    return (async function* () {
      for await (const e of events) yield e.type === 'done' && !e.draft ? { ...e, draft: { tokens: 0, accepted: 0 } } : e;
    })();
  }

  /** A chat; with an answer schema (the engine's plan), a raw completion of the rendered prompt under it (constrained.ts). */
  chat(p: ChatParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    if (p.constraint) {
      const { constraint } = p;
      const run: RunCall = (build) => this.#requests.run(() => this.#withAdapters(withNativeSampling(build(), p.options), p.adapters), p.logprobs, signal);
      return this.#drafts(constrained(this.server, this.model.name, p, constraint, run, signal));
    }
    return this.#drafts(
      this.#requests.run(
        () => {
          const call = this.#withAdapters(withNativeSampling(openaiWire.chat(this.model.name, p), p.options), p.adapters);
          // Thinking switched off in the prompt where the template can (Qwen3's `enable_thinking`).
          if (p.think === false) call.body['chat_template_kwargs'] = { enable_thinking: false };
          return call;
        },
        p.logprobs,
        signal,
      ),
    );
  }

  /**
   * Every adapter the server holds, at the request's scale (off unless the request names it):
   * llama-server takes `lora` as the scales of the ids it lists, the others at 0.
   */
  #withAdapters(call: WireCall, requested: readonly AdapterScale[] | undefined): WireCall {
    const loaded = this.adapters?.loaded;
    if (!loaded) return call;
    const scale = new Map((requested ?? []).map((a) => [a.path, a.scale]));
    call.body['lora'] = loaded.map((a, id) => ({ id, scale: scale.get(a.path) ?? 0 }));
    return call;
  }

  /** One window of audio as a chat turn of a model that hears (hearing.ts); a 400 from the engine for a model that does not. */
  async transcribe(p: TranscribeParams, signal: AbortSignal): Promise<TranscribeResult> {
    const ids = async (text: string) =>
      (await tokenize(this.server, { content: text, addSpecial: false, parseSpecial: false, withPieces: false }, signal)).tokens;
    return heard(this.chat(hearingChat(p), signal), ids, p);
  }

  /** The prompt's length as the server evaluates it: rendered by the model's template, counted by its tokenizer (BOS included). */
  countChatTokens(p: ChatParams, signal: AbortSignal): Promise<number> {
    return promptLength(this.server, this.model.name, p, signal);
  }

  /**
   * Bytes held: the server's, and its embedding server's while that runs, so the scheduler's
   * plan and `/api/ps` count it from the first embedding request on.
   */
  get sizeBytes(): number {
    return this.#sizeBytes + this.#embedderBytes;
  }

  /**
   * Starts the embedding server of a generation model, with the memory it holds beyond what it
   * shares with this one (backend.ts); unset for an embedding model or a reranker.
   */
  startEmbedder: (() => Promise<{ server: LlamaServer; bytes: number }>) | undefined;
  #embedder: Promise<LlamaServer> | undefined;
  /** The running embedding server's own memory (0 while none runs). */
  #embedderBytes = 0;

  /** Forgets the embedding server (it exited): the next embedding request starts another. */
  dropEmbedder(): void {
    this.#embedder = undefined;
    this.#embedderBytes = 0;
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
        this.#embedder = this.startEmbedder().then(({ server, bytes }) => {
          this.#embedderBytes = bytes;
          return server;
        });
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
    this.dropEmbedder();
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
