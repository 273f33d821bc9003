/**
 * One loaded GGUF model inside a runner process: the model, one generation context with a pool of
 * `parallel` sequences (continuous batching: concurrent requests share each `llama_decode`, see
 * batching.ts), and a lazily created embedding context. Each request runs on a slot (slots.ts)
 * with its prompt built by prompts.ts and its grammar from grammars.ts.
 *
 * @module
 */
import {
  DraftSequenceTokenPredictor,
  getLlama,
  InputLookupTokenPredictor,
  LlamaChat,
  LlamaLogLevel,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
  type TokenPredictor,
} from 'node-llama-cpp';
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent } from 'lia/engine';
import type { ModelCapability } from 'lia/model-store';
import type { LoadSpec, ParentMessage, RunnerDevice, RunnerInfo, RunnerResult } from '../protocol.js';
import { minBatchTokens, useBatchThreads, type BatchThreads } from './batch-threads.js';
import { fixBatchDispatch, stepsThenPrompts } from './batching.js';
import { Embedder } from './embedding.js';
import { Ranker } from './ranking.js';
import { detokenize, tokenize } from './tokens.js';
import { RequestError } from './errors.js';
import { generation, meterPrompt, now, prefill, WHOLE_PROMPT, type Emit } from './generation.js';
import { Grammars } from './grammars.js';
import { versionWarning } from './llama-internals.js';
import { generateWithLogprobs } from './logprobs.js';
import { toChatHistory, toFunctions, toToolCalls } from './history.js';
import { Prompts, type Stops } from './prompts.js';
import { maxTokensFor, toLlamaSampling, type LlamaSampling } from './sampling.js';
import { SlotPool, type Slot } from './slots.js';
import { hasThoughts, resolvePromptFormat, type PromptFormat } from './templates.js';

/** Bindings loaded ahead of the model (a spare runner does this while it waits). */
export interface Prepared {
  gpu: 'auto' | false;
  llama: Promise<Llama>;
}

/**
 * Loads the llama.cpp bindings: `build: "never"` (never compile or download) and the GPU when a
 * prebuilt binary for it works. The thread ceiling is set when the model is loaded.
 */
export function prepareLlama(gpu: 'auto' | false): Prepared {
  return { gpu, llama: getLlama({ gpu, build: 'never', maxThreads: 1, logLevel: LlamaLogLevel.error }) };
}

/**
 * The GPU the bindings run on, with its memory now; none on the CPU or when the back end sees no
 * device (Vulkan without a GPU lists none, and lavapipe only when `GGML_VK_VISIBLE_DEVICES` names it).
 */
export async function gpuDevices(llama: Llama): Promise<RunnerDevice[]> {
  if (llama.gpu === false) return [];
  const [names, vram] = await Promise.all([llama.getGpuDeviceNames(), llama.getVramState()]);
  if (names.length === 0 || vram.total <= 0) return [];
  return [{ id: llama.gpu, name: names.join(', '), totalBytes: vram.total, freeBytes: vram.free }];
}

/** node-llama-cpp's names of the KV cache types. */
const KV_TYPES = { f16: 'F16', q8_0: 'Q8_0', q4_0: 'Q4_0' } as const;

export class ModelSession {
  readonly info: RunnerInfo;
  /** Things the operator should know about this load (the runner logs them as warnings). */
  readonly warnings: string[] = [];
  readonly #llama: Llama;
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;
  readonly #slots: SlotPool;
  readonly #prompts: Prompts;
  readonly #grammars: Grammars;
  readonly #embedder: Embedder;
  readonly #ranker: Ranker;
  readonly #batchThreads: BatchThreads | null;
  /** The draft model and its context (speculative decoding with a draft model), disposed with the session. */
  readonly #draft: Draft | null;

  private constructor(llama: Llama, model: LlamaModel, context: LlamaContext, spec: LoadSpec, info: RunnerInfo, format: PromptFormat, draft: Draft | null) {
    this.#llama = llama;
    this.#model = model;
    this.#context = context;
    this.#draft = draft;
    this.info = info;
    this.#slots = new SlotPool(context, spec.parallel, format.wrapper, predictors(spec, draft));
    this.#prompts = new Prompts(model, format, info.contextLength);
    this.#grammars = new Grammars(llama);
    this.#embedder = new Embedder(model, info.contextLength, spec.threads);
    // Scoring evaluates whole documents: batch work, so the batch threads (llama-server's -tb).
    this.#ranker = new Ranker(model, info.contextLength, spec.batchThreads ?? spec.threads);
    this.#batchThreads = useBatchThreads(context, spec.threads, spec.batchThreads ?? spec.threads, minBatchTokens(model.size));
    if (!this.#batchThreads) {
      this.warnings.push(
        "node-llama-cpp's native context lacks the calls runner/batch-threads.ts wraps (another version?): large batches run on the small-batch thread count",
      );
    }
    if (!fixBatchDispatch(context, () => this.#slots.busy)) {
      this.warnings.push(
        "node-llama-cpp's batching internals are not the ones runner/batching.ts patches (another version?): " +
          'concurrent streams run without its fixes and share decodes less well',
      );
    }
  }

  /** Loads the model and provisions its context, on `prepared` bindings when they match. */
  static async load(spec: LoadSpec, prepared?: Prepared): Promise<ModelSession> {
    const llama = prepared && prepared.gpu === spec.gpu ? await prepared.llama : await prepareLlama(spec.gpu).llama;
    // The ceiling shared by every context of this process: node-llama-cpp otherwise allows at least
    // 4 threads, more than the free cores of a small machine, and spinning threads then wait on each other.
    llama.maxThreads = spec.threads;
    const t0 = performance.now();
    const model = await llama.loadModel({ modelPath: spec.modelPath, ...(spec.gpuLayers === undefined ? {} : { gpuLayers: spec.gpuLayers }) });
    const t1 = performance.now();
    const trained = model.trainContextSize;
    const contextLength = spec.contextLength > 0 ? Math.min(spec.contextLength, trained) : trained;
    const context = await model.createContext({
      sequences: spec.parallel,
      contextSize: contextLength,
      batchSize: Math.min(spec.batchSize, contextLength * spec.parallel),
      threads: spec.threads,
      flashAttention: spec.flashAttention ?? 'auto',
      ...(spec.kvCacheType ? { experimentalKvCacheKeyType: KV_TYPES[spec.kvCacheType], experimentalKvCacheValueType: KV_TYPES[spec.kvCacheType] } : {}),
      batching: { itemPrioritizationStrategy: stepsThenPrompts },
      ...(spec.adapters?.length ? { lora: { adapters: spec.adapters.map((a) => ({ filePath: a.path, scale: a.scale })) } } : {}),
    });
    const draft = await loadDraft(llama, spec, contextLength);
    const t2 = performance.now();
    const format = resolvePromptFormat(model, spec.template, spec.knownChatWrapper);
    const t3 = performance.now();
    const usage = await llama.getLlamaMemoryUsage();
    const capabilities: ModelCapability[] = ['completion'];
    const jinja = model.fileInfo.metadata.tokenizer?.chat_template;
    if (typeof jinja === 'string' && /\btools\b/.test(jinja)) capabilities.push('tools');
    if (hasThoughts(format.wrapper)) capabilities.push('thinking');
    if (model.tokens.infill.prefix != null && model.tokens.infill.suffix != null) capabilities.push('insert');
    const info: RunnerInfo = {
      contextLength,
      sizeBytes: usage.cpuRam + usage.gpuVram || model.size,
      vramBytes: usage.gpuVram,
      capabilities,
      chatWrapper: format.wrapper.wrapperName,
      gpu: llama.gpu,
      loadMs: { model: Math.round(t1 - t0), context: Math.round(t2 - t1), template: Math.round(t3 - t2) },
    };
    const session = new ModelSession(llama, model, context, spec, info, format, draft);
    const drift = await versionWarning();
    if (drift) session.warnings.push(drift);
    return session;
  }

  /** The thread count of large batches from now on (the parent lowers it while other models are loaded). */
  setBatchThreads(threads: number): void {
    this.#batchThreads?.set(threads);
  }

  /** Raw or templated text completion (`/api/generate`). */
  async generate(params: GenerateParams, signal: AbortSignal, emit: Emit): Promise<void> {
    const grammar = await this.#grammars.forAnswer(params.constraint);
    const sampling = toLlamaSampling(params.options, this.info.contextLength);
    if (params.suffix) {
      if (params.logprobs !== undefined) throw new RequestError('logprobs are not available with suffix');
      return this.#infill(params, sampling, grammar, signal, emit);
    }
    const rendered = this.#prompts.forGenerate(params);
    const stops = rendered.stops;
    const tokens = params.context?.length && !params.raw ? [...this.#knownTokens(params.context), ...rendered.tokens] : rendered.tokens;
    const promptTokens = this.#prompts.checkLength(tokens);
    let answer = '';
    const collect: Emit = (e) => {
      if (e.type === 'token') answer += e.text;
      emit(e);
    };
    await this.#slots.with(this.#prompts.withBos(tokens), async (slot) => {
      const started = now();
      const metered = meterPrompt(slot.seq);
      await prefill(slot.seq, this.#prompts.withBos(tokens), signal);
      const maxTokens = maxTokensFor(params.options, this.info.contextLength, promptTokens);
      const { done } = await this.#complete(
        slot,
        { tokens, stops, promptTokens },
        { sampling, maxTokens, grammar, signal, emit: collect, started, logprobs: params.logprobs },
      );
      metered(done);
      // Ollama's `context`: the exchange as token ids, for a client to send back with its next
      // prompt. The answer is tokenized from the text sent (stop sequences cut), as Ollama does.
      if (done.type === 'done' && !params.raw) done.context = [...tokens, ...this.#model.tokenize(answer, false, 'trimLeadingSpace')];
      emit(done);
    });
  }

  /** A request's token ids, checked against the vocabulary (llama.cpp aborts on an unknown id). */
  #knownTokens(ids: number[]): Token[] {
    const size = this.#vocabularySize;
    const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || size === 0 || id >= size);
    if (bad !== undefined) throw new RequestError(`context holds ${bad}, which is not a token of this model`);
    return ids as Token[];
  }

  /** Tokens in the model's vocabulary, from the GGUF header (0 when the header does not list them). */
  get #vocabularySize(): number {
    const list = (this.#model.fileInfo.metadata as { tokenizer?: { ggml?: { tokens?: unknown } } }).tokenizer?.ggml?.tokens;
    return Array.isArray(list) ? list.length : 0;
  }

  /**
   * A conversation with the model's chat template (`/api/chat`). Without tools, or with an answer
   * schema (the engine's plan: an output format or a forced tool call, the tools documented in the
   * prompt), the rendered prompt is completed like a templated generate (LlamaCompletion with the
   * format's stop triggers, under the schema's grammar): LlamaChat renders and tokenizes the
   * history again and runs a heavier loop per token (measured, bench-random-135m: 0.963 of
   * generate's decode rate and 0.5 ms more to the first token). The text goes out as the model
   * writes it, a `<think>…</think>` section included (the engine splits it when asked). Tools the
   * model may call need LlamaChat's function calling; its thought segments are put back between
   * the same tags (see {@link thoughtsAsText}). `params.think` false renders the prompt with the
   * model's thinking switched off where the format can (prompts.ts, `wrapper`). A prompt longer
   * than the context is a 400 (the engine grows the context or cuts the conversation).
   */
  async chat(params: ChatParams, signal: AbortSignal, emit: Emit): Promise<void> {
    const tools = params.tools ?? [];
    const constrained = params.constraint !== undefined;
    if (params.logprobs !== undefined && tools.length > 0 && !constrained) throw new RequestError('logprobs are not available with tools the model may call');
    const grammar = await this.#grammars.forAnswer(params.constraint);
    const functions = tools.length > 0 ? toFunctions(tools) : undefined;
    const sampling = toLlamaSampling(params.options, this.info.contextLength);
    const wrapper = this.#prompts.wrapper(params.think);
    const prompt = this.#prompts.forChat(toChatHistory(params.messages), functions, params.think);
    const { tokens, promptTokens } = prompt;
    await this.#slots.with(this.#prompts.withBos(tokens), async (slot) => {
      const started = now();
      const metered = meterPrompt(slot.seq);
      await prefill(slot.seq, this.#prompts.withBos(tokens), signal);
      const maxTokens = maxTokensFor(params.options, this.info.contextLength, promptTokens);
      // A format that opens the thought in the prompt (Qwen 3.5): the output starts inside it.
      if (opensThought(wrapper) && !constrained) emit({ type: 'token', text: '<think>' });
      if (functions === undefined || constrained) {
        const { done } = await this.#complete(slot, prompt, { sampling, maxTokens, grammar, signal, emit, started, logprobs: params.logprobs });
        emit(metered(done));
        return;
      }
      // The LlamaChat of the slot speaks the model's default format; another one is made for a
      // request with thinking switched off, so that it renders the prompt just prefilled.
      const chat = wrapper === slot.chat.chatWrapper ? slot.chat : new LlamaChat({ contextSequence: slot.seq, chatWrapper: wrapper });
      type ChatResult = { metadata: { stopReason: string }; functionCalls?: readonly { functionName: string; params: unknown }[] };
      try {
        const { result, done } = await generation<ChatResult>(signal, { request: sampling.customStopTriggers }, emit, started, promptTokens, (o) =>
          chat.generateResponse(prompt.history, {
            ...sampling,
            ...o,
            ...thoughtsAsText((chunk) => o.onTextChunk?.(chunk)),
            customStopTriggers: [],
            maxTokens,
            functions,
          }),
        );
        const calls = result?.functionCalls;
        if (calls && calls.length > 0) emit({ type: 'tool_calls', calls: toToolCalls(calls) });
        emit(metered(done));
      } finally {
        if (chat !== slot.chat) chat.dispose({ disposeSequence: false });
      }
    });
  }

  /**
   * Completes a prompt already prefilled on `slot` with LlamaCompletion (generate, and chat without
   * tools): the prompt format's token triggers go to the library, its text stops join the
   * request's stop sequences (see prompts.ts, `Stops`). A request for logprobs runs logprobs.ts's
   * loop instead, with the same prompt, stops, sampling and grammar (and, for a chat format with
   * thought segments, the raw text: the engine splits thinking from it when asked).
   */
  async #complete(
    slot: Slot,
    prompt: { tokens: Token[]; stops: Stops; promptTokens: number },
    run: {
      sampling: LlamaSampling;
      maxTokens: number;
      grammar: LlamaGrammar | undefined;
      signal: AbortSignal;
      emit: Emit;
      started: bigint;
      logprobs?: number | undefined;
    },
  ): Promise<{ done: GenerationEvent }> {
    const { tokens, stops } = prompt;
    const { sampling, grammar } = run;
    if (run.logprobs !== undefined) {
      return generateWithLogprobs({
        model: this.#model,
        seq: slot.seq,
        tokens: this.#prompts.withBos(tokens),
        stops,
        requestStops: sampling.customStopTriggers,
        sampling,
        grammar,
        maxTokens: run.maxTokens,
        top: run.logprobs,
        promptTokens: prompt.promptTokens,
        started: run.started,
        signal: run.signal,
        emit: run.emit,
      });
    }
    return generation(
      run.signal,
      { request: sampling.customStopTriggers, format: stops.texts },
      run.emit,
      run.started,
      prompt.promptTokens,
      (o) =>
        slot.completion.generateCompletionWithMeta(tokens, {
          ...sampling,
          ...o,
          customStopTriggers: stops.tokens,
          maxTokens: run.maxTokens,
          ...WHOLE_PROMPT,
          ...(grammar ? { grammar } : {}),
        }),
      (generated) => this.#model.detokenize(generated, false, tokens.slice(-8)),
    );
  }

  /**
   * The length of the prompt {@link chat} would evaluate (BOS included): the messages and tools in
   * the chat format, whole (no message dropped to fit the context).
   */
  countChatTokens(params: ChatParams): number {
    const tools = params.tools ?? [];
    return this.#prompts.count(toChatHistory(params.messages), tools.length > 0 ? toFunctions(tools) : undefined, params.think);
  }

  /** Embeddings (see embedding.ts). */
  embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    return this.#embedder.embed(params, signal);
  }

  /** Frees the contexts, the model and the bindings; the process exits afterwards anyway. */
  /** Reranking (ranking.ts), `/tokenize` and `/detokenize` (tokens.ts). */
  async answer(message: Extract<ParentMessage, { t: 'rank' | 'tokenize' | 'detokenize' }>, signal: AbortSignal): Promise<RunnerResult> {
    if (message.t === 'rank') return this.#ranker.rank(message.params, signal);
    return message.t === 'tokenize' ? tokenize(this.#model, message.params) : detokenize(this.#model, message.tokens);
  }

  async dispose(): Promise<void> {
    await this.#ranker.dispose();
    await this.#embedder.dispose();
    await this.#context.dispose();
    await this.#draft?.context.dispose();
    await this.#draft?.model.dispose();
    await this.#model.dispose();
    await this.#llama.dispose();
  }

  /** Fill-in-the-middle (`suffix`) with the model's infill tokens; a 400 for a model without them. */
  async #infill(params: GenerateParams, sampling: LlamaSampling, grammar: LlamaGrammar | undefined, signal: AbortSignal, emit: Emit): Promise<void> {
    const { prefix, suffix } = this.#model.tokens.infill;
    if (prefix == null || suffix == null) throw new RequestError('this model does not support insert (suffix)');
    const promptTokens = this.#model.tokenize(params.prompt).length + this.#model.tokenize(params.suffix ?? '').length + 3;
    await this.#slots.with([], async (slot) => {
      const { done } = await generation(signal, { request: sampling.customStopTriggers }, emit, now(), promptTokens, (o) =>
        slot.completion.generateInfillCompletionWithMeta(params.prompt, params.suffix ?? '', {
          ...sampling,
          ...o,
          customStopTriggers: [],
          maxTokens: maxTokensFor(params.options, this.info.contextLength, promptTokens),
          disableContextShift: true,
          ...(grammar ? { grammar } : {}),
        }),
      );
      emit(done);
    });
  }
}

/** A draft model loaded for speculative decoding, with one sequence per slot of the model. */
interface Draft {
  model: LlamaModel;
  context: LlamaContext;
}

/**
 * Loads the draft model of `spec` (on the CPU unless the model went to a GPU, where node-llama-cpp
 * places it itself), with a context of the model's length and slots.
 */
async function loadDraft(llama: Llama, spec: LoadSpec, contextLength: number): Promise<Draft | null> {
  const s = spec.speculation;
  if (!s || !('draftPath' in s)) return null;
  const model = await llama.loadModel({ modelPath: s.draftPath, ...(spec.gpuLayers === 0 ? { gpuLayers: 0 } : {}) });
  const context = await model.createContext({
    sequences: spec.parallel,
    contextSize: Math.min(contextLength, model.trainContextSize),
    batchSize: Math.min(spec.batchSize, contextLength * spec.parallel),
    threads: spec.threads,
  });
  return { model, context };
}

/**
 * A new token predictor per slot (node-llama-cpp ties one to a sequence when it is taken): a draft
 * sequence that always drafts `maxDraft` tokens (none dropped for low confidence, so that what is
 * drafted does not depend on timing), or input lookup of n-grams of at least `ngram` tokens.
 */
function predictors(spec: LoadSpec, draft: Draft | null): (() => TokenPredictor) | undefined {
  const s = spec.speculation;
  if (!s) return undefined;
  if ('draftPath' in s) {
    if (!draft) return undefined;
    return () => new DraftSequenceTokenPredictor(draft.context.getSequence(), { minTokens: s.maxDraft, maxTokens: s.maxDraft, minConfidence: 0 });
  }
  return () => new InputLookupTokenPredictor({ patternLength: { min: s.ngram }, predictionLength: { min: 1, max: s.maxDraft } });
}

/** Whether a chat format opens its thought section in the prompt (the answer starts inside it). */
function opensThought(wrapper: ChatWrapper): boolean {
  const thought = wrapper.settings.segments?.thought as { openOnResponseStart?: boolean } | undefined;
  return thought?.openOnResponseStart === true;
}

/**
 * LlamaChat's streaming hooks for a chat with tools: its thought segments, which it keeps out of
 * the answer text, go to `text` between `<think>` and `</think>`, ahead of the answer, as a
 * completion writes them (the engine splits them off when the request asked for thinking).
 */
function thoughtsAsText(text: (chunk: string) => void): {
  onTextChunk: undefined;
  onResponseChunk: (chunk: { type: 'segment' | undefined; segmentType?: string | undefined; text: string; segmentEndTime?: Date | undefined }) => void;
} {
  let open = false;
  return {
    onTextChunk: undefined,
    onResponseChunk(chunk) {
      if (chunk.type === 'segment') {
        if (chunk.segmentType !== 'thought') return;
        let out = chunk.text;
        if (!open) out = `<think>${out}`;
        open = chunk.segmentEndTime === undefined;
        if (!open) out += '</think>';
        if (out !== '') text(out);
        return;
      }
      if (open) text('</think>');
      open = false;
      if (chunk.text !== '') text(chunk.text);
    },
  };
}
