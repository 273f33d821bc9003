/**
 * One loaded GGUF model inside a runner process: the model, one generation context with a pool of
 * `parallel` sequences (continuous batching: concurrent requests share each `llama_decode`), and
 * a lazily created embedding context. Requests take a sequence, preferring the one whose cached
 * tokens share the longest prefix with the new prompt (KV reuse), and give it back once the
 * generation has settled: sequences are never disposed under in-flight work.
 *
 * @module
 */
import {
  getLlama,
  LlamaChat,
  LlamaCompletion,
  type ChatWrapper,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaEmbeddingContext,
  type LlamaGrammar,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import type {
  ChatParams,
  EmbedParams,
  EmbedResult,
  GenerateParams,
  GenerationEvent,
  OutputFormat,
  ToolDefinition,
} from '../../../core/contracts/backend.js';
import type { ModelCapability } from '../../../core/contracts/model-store.js';
import type { LoadSpec, RunnerInfo } from '../protocol.js';
import { fixBatchDispatch } from './batching.js';
import { forcedChoice, forcedToolSchema, parseForcedCall, ToolSchemaError, type ForcedToolChoice } from './forced-tools.js';
import { toChatHistory, toFunctions, toToolCalls } from './history.js';
import { maxTokensFor, toLlamaSampling } from './sampling.js';
import { generation, now, prefill, type Emit } from './generation.js';
import { renderGoTemplate, resolvePromptFormat, wrapperForGoTemplate, type PromptFormat } from './templates.js';

/** An error caused by the request, not the engine (the parent answers 400). */
export class RequestError extends Error {
  override readonly name = 'RequestError';
}


interface Slot {
  /** The sequence id in the context (node-llama-cpp hands out the lowest free one: creation order). */
  index: number;
  seq: LlamaContextSequence;
  completion: LlamaCompletion;
  chat: LlamaChat;
}

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
  return { gpu, llama: getLlama({ gpu, build: 'never', maxThreads: 1, logLevel: 'error' as never }) };
}


export class ModelSession {
  readonly info: RunnerInfo;
  readonly #llama: Llama;
  readonly #model: LlamaModel;
  readonly #context: LlamaContext;
  readonly #format: PromptFormat;
  readonly #spec: LoadSpec;
  readonly #free: Slot[];
  /** Sequence ids with a request running (what a batch waits for, see batching.ts). */
  readonly #busy = new Set<number>();
  readonly #waiting: ((slot: Slot) => void)[] = [];
  readonly #grammars = new Map<string, Promise<LlamaGrammar>>();
  #embedding: Promise<LlamaEmbeddingContext> | null = null;

  private constructor(llama: Llama, model: LlamaModel, context: LlamaContext, spec: LoadSpec, info: RunnerInfo, format: PromptFormat) {
    this.#llama = llama;
    this.#model = model;
    this.#context = context;
    this.#spec = spec;
    this.info = info;
    this.#format = format;
    this.#free = [];
    for (let i = 0; i < spec.parallel; i++) {
      const seq = context.getSequence();
      const id = (seq as unknown as { _sequenceId?: unknown })._sequenceId;
      this.#free.push({
        index: typeof id === 'number' ? id : i,
        seq,
        completion: new LlamaCompletion({ contextSequence: seq }),
        chat: new LlamaChat({ contextSequence: seq, chatWrapper: format.wrapper }),
      });
    }
    fixBatchDispatch(context, () => this.#busy);
  }

  /** Loads the model and provisions its context, on `prepared` bindings when they match. */
  static async load(spec: LoadSpec, prepared?: Prepared): Promise<ModelSession> {
    const llama = prepared && prepared.gpu === spec.gpu ? await prepared.llama : await prepareLlama(spec.gpu).llama;
    // The ceiling shared by every context of this process (reference §1).
    llama.maxThreads = spec.threads;
    const model = await llama.loadModel({ modelPath: spec.modelPath });
    const trained = model.trainContextSize;
    const contextLength = spec.contextLength > 0 ? Math.min(spec.contextLength, trained) : trained;
    const context = await model.createContext({
      sequences: spec.parallel,
      contextSize: contextLength,
      batchSize: Math.min(spec.batchSize, contextLength * spec.parallel),
      threads: spec.threads,
      flashAttention: 'auto' as never,
    });
    const format = resolvePromptFormat(model, spec.template);
    const usage = await llama.getLlamaMemoryUsage();
    const capabilities: ModelCapability[] = ['completion'];
    const jinja = model.fileInfo.metadata.tokenizer?.chat_template;
    if (typeof jinja === 'string' && /\btools\b/.test(jinja)) capabilities.push('tools');
    if (model.tokens.infill.prefix != null && model.tokens.infill.suffix != null) capabilities.push('insert');
    const info: RunnerInfo = {
      contextLength,
      sizeBytes: usage.cpuRam + usage.gpuVram || model.size,
      vramBytes: usage.gpuVram,
      capabilities,
      chatWrapper: format.wrapper.wrapperName,
      gpu: llama.gpu,
    };
    return new ModelSession(llama, model, context, spec, info, format);
  }

  /** Raw or templated text completion (`/api/generate`). */
  async generate(params: GenerateParams, signal: AbortSignal, emit: Emit): Promise<void> {
    const grammar = await this.#grammar(params.format);
    const sampling = toLlamaSampling(params.options, this.info.contextLength);
    if (params.suffix) return this.#infill(params, sampling, grammar, signal, emit);
    const { tokens, stops } = this.#generatePrompt(params);
    const promptTokens = this.#checkPromptLength(tokens);
    await this.#withSlot(this.#withBos(tokens), async (slot) => {
      const started = now();
      await prefill(slot.seq, this.#withBos(tokens), signal);
      const { done } = await generation(signal, sampling.customStopTriggers, emit, started, promptTokens, (o) =>
        slot.completion.generateCompletionWithMeta(tokens, {
          ...sampling,
          ...o,
          customStopTriggers: stops,
          maxTokens: maxTokensFor(params.options, this.info.contextLength, promptTokens),
          disableContextShift: true,
          ...(grammar ? { grammar } : {}),
        }),
        (generated) => this.#model.detokenize(generated, false, tokens.slice(-8)),
      );
      emit(done);
    });
  }

  /** A conversation with the model's chat template (`/api/chat`). */
  async chat(params: ChatParams, signal: AbortSignal, emit: Emit): Promise<void> {
    const tools = params.tools ?? [];
    if (tools.length > 0 && params.format) throw new RequestError('"format" and "tools" cannot be used together');
    const forced = forcedChoice(params.toolChoice);
    if (forced) return this.#forcedToolCall(params, forced, signal, emit);
    const grammar = await this.#grammar(params.format);
    const functions = tools.length > 0 ? toFunctions(tools) : undefined;
    const sampling = toLlamaSampling(params.options, this.info.contextLength);
    const history = toChatHistory(params.messages);
    const state = this.#format.wrapper.generateContextState({
      chatHistory: [...history, { type: 'model', response: [] }],
      ...(functions ? { availableFunctions: functions } : {}),
    });
    const tokens = state.contextText.tokenize(this.#model.tokenizer);
    const promptTokens = tokens.length;
    await this.#withSlot(tokens, async (slot) => {
      const started = now();
      await prefill(slot.seq, tokens, signal);
      const maxTokens = Math.max(1, maxTokensFor(params.options, this.info.contextLength, promptTokens));
      type ChatResult = { metadata: { stopReason: string }; functionCalls?: readonly { functionName: string; params: unknown }[] };
      const { result, done } = await generation(signal, sampling.customStopTriggers, emit, started, promptTokens, (o) =>
        functions
          ? (slot.chat.generateResponse(history, { ...sampling, ...o, customStopTriggers: [], maxTokens, functions }) as Promise<ChatResult>)
          : (slot.chat.generateResponse(history, { ...sampling, ...o, customStopTriggers: [], maxTokens, ...(grammar ? { grammar } : {}) }) as Promise<ChatResult>),
      );
      if (result?.functionCalls && result.functionCalls.length > 0) emit({ type: 'tool_calls', calls: toToolCalls(result.functionCalls) });
      emit(done);
    });
  }

  /**
   * A chat turn that must be one tool call (`toolChoice` `required` or named; see forced-tools.ts):
   * the prompt is the one {@link chat} builds (tools documented), the answer is sampled under the
   * call's JSON-schema grammar and never streamed as text. The parsed call goes out as one
   * `tool_calls` event before `done`. Cut by the token limit, the answer has no call and ends with
   * reason `length`. Stop sequences do not apply (they would cut the JSON).
   */
  async #forcedToolCall(params: ChatParams, choice: ForcedToolChoice, signal: AbortSignal, emit: Emit): Promise<void> {
    const tools = params.tools ?? [];
    const grammar = await this.#toolGrammar(tools, choice);
    const sampling = toLlamaSampling(params.options, this.info.contextLength);
    const state = this.#format.wrapper.generateContextState({
      chatHistory: [...toChatHistory(params.messages), { type: 'model', response: [] }],
      availableFunctions: toFunctions(tools),
    });
    // LlamaCompletion prepends BOS itself, as for generate.
    const tokens = this.#withoutBos(state.contextText.tokenize(this.#model.tokenizer));
    const promptTokens = this.#checkPromptLength(tokens);
    await this.#withSlot(this.#withBos(tokens), async (slot) => {
      const started = now();
      await prefill(slot.seq, this.#withBos(tokens), signal);
      const maxTokens = Math.max(1, maxTokensFor(params.options, this.info.contextLength, promptTokens));
      const { result, done } = await generation(signal, [], () => undefined, started, promptTokens, (o) =>
        slot.completion.generateCompletionWithMeta(tokens, {
          ...sampling,
          ...o,
          customStopTriggers: [],
          maxTokens,
          disableContextShift: true,
          grammar,
        }),
      );
      const text = result?.response ?? '';
      const calls = parseForcedCall(text, tools, choice);
      if (calls) emit({ type: 'tool_calls', calls });
      else if (done.type === 'done' && done.reason !== 'length') {
        // The grammar admits only complete calls, so this is an engine fault, not the client's.
        throw new Error(`the forced tool call is not a valid call: ${JSON.stringify(text.slice(0, 200))}`);
      }
      emit(done);
    });
  }

  /** The grammar of a forced tool call, cached with the format grammars; a bad tool schema is a 400. */
  #toolGrammar(tools: readonly ToolDefinition[], choice: ForcedToolChoice): Promise<LlamaGrammar> {
    let schema: Record<string, unknown>;
    try {
      schema = forcedToolSchema(tools, choice);
    } catch (err) {
      throw err instanceof ToolSchemaError ? new RequestError(err.message) : err;
    }
    const key = `tool_choice:${JSON.stringify(schema)}`;
    let grammar = this.#grammars.get(key);
    if (!grammar) {
      grammar = this.#llama
        .createGrammarForJsonSchema(schema as never)
        .then((g) => g as LlamaGrammar)
        .catch((err: unknown) => {
          this.#grammars.delete(key);
          throw new RequestError(`the tool schema cannot be compiled to a grammar: ${(err as Error).message}`);
        });
      if (this.#grammars.size > 32) this.#grammars.clear();
      this.#grammars.set(key, grammar);
    }
    return grammar;
  }

  /** Embeddings, one input at a time (the embedding context serialises them anyway). */
  async embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    const ctx = await this.#embeddingContext();
    const overhead = ctx.calculateInputLength([]);
    const limit = ctx.model.trainContextSize > 0 ? Math.min(this.info.contextLength, ctx.model.trainContextSize) - overhead - 1 : 0;
    const embeddings: number[][] = [];
    let promptTokens = 0;
    for (const input of params.inputs) {
      if (signal.aborted) throw signal.reason;
      let tokens = this.#model.tokenize(input);
      if (tokens.length > limit) {
        if (!params.truncate) throw new RequestError('the input length exceeds the context length');
        tokens = tokens.slice(0, limit);
      }
      if (tokens.length === 0) tokens = [this.#bos() ?? (0 as Token)];
      promptTokens += tokens.length + overhead;
      const { vector } = await ctx.getEmbeddingFor(tokens);
      embeddings.push(shape(vector, params.dimensions, params.normalize ?? true));
    }
    return { embeddings, promptTokens };
  }

  /** Frees the contexts, the model and the bindings; the process exits afterwards anyway. */
  async dispose(): Promise<void> {
    const emb = await this.#embedding?.catch(() => null);
    await emb?.dispose();
    await this.#context.dispose();
    await this.#model.dispose();
    await this.#llama.dispose();
  }

  #bos(): Token | null {
    return this.#model.tokens.shouldPrependBosToken ? this.#model.tokens.bos : null;
  }

  /** A templated prompt without its leading BOS (LlamaCompletion adds BOS itself). */
  #withoutBos(tokens: Token[]): Token[] {
    const bos = this.#bos();
    return bos !== null && tokens[0] === bos ? tokens.slice(1) : tokens;
  }

  /** The prompt's length as evaluated (BOS included); a 400 when it leaves no room in the context. */
  #checkPromptLength(tokens: Token[]): number {
    const promptTokens = tokens.length + (this.#bos() === null ? 0 : 1);
    if (promptTokens >= this.info.contextLength) {
      throw new RequestError(`the prompt is ${promptTokens} tokens long; the context length is ${this.info.contextLength}`);
    }
    return promptTokens;
  }

  /** The tokens LlamaCompletion evaluates: BOS (when the vocabulary wants it) + the prompt. */
  #withBos(tokens: Token[]): Token[] {
    const bos = this.#bos();
    return bos === null ? tokens : [bos, ...tokens];
  }

  /** Builds the prompt of a generate request (without BOS; LlamaCompletion adds it). */
  #generatePrompt(params: GenerateParams): { tokens: Token[]; stops: (string | import('node-llama-cpp').LlamaText)[] } {
    const tokenizer = this.#model.tokenizer;
    const plain = (text: string) => ({ tokens: this.#model.tokenize(text, false, 'trimLeadingSpace'), stops: [] });
    if (params.raw) return plain(params.prompt);
    let wrapper: ChatWrapper = this.#format.wrapper;
    if (params.template !== undefined && params.template !== '') {
      const rendered = renderGoTemplate(params.template, { System: params.system, Prompt: params.prompt });
      if (rendered !== null) return plain(rendered);
      wrapper = wrapperForGoTemplate(params.template) ?? wrapper;
    } else if (this.#format.untemplated) {
      // Ollama's default template is `{{ .Prompt }}`.
      return plain(params.prompt);
    }
    const state = wrapper.generateContextState({
      chatHistory: [
        ...(params.system ? [{ type: 'system' as const, text: params.system }] : []),
        { type: 'user', text: params.prompt },
        { type: 'model', response: [] },
      ],
    });
    return { tokens: this.#withoutBos(state.contextText.tokenize(tokenizer)), stops: state.stopGenerationTriggers };
  }

  async #infill(
    params: GenerateParams,
    sampling: ReturnType<typeof toLlamaSampling>,
    grammar: LlamaGrammar | undefined,
    signal: AbortSignal,
    emit: Emit,
  ): Promise<void> {
    const { prefix, suffix } = this.#model.tokens.infill;
    if (prefix == null || suffix == null) throw new RequestError('this model does not support insert (suffix)');
    const promptTokens = this.#model.tokenize(params.prompt).length + this.#model.tokenize(params.suffix ?? '').length + 3;
    await this.#withSlot([], async (slot) => {
      const { done } = await generation(signal, sampling.customStopTriggers, emit, now(), promptTokens, (o) =>
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

  /**
   * Runs `fn` on a free sequence and always gives it back. `tokens` are the prompt as the sequence
   * will hold it (BOS included), so that a cached prefix is found.
   */
  async #withSlot(tokens: Token[], fn: (slot: Slot) => Promise<void>): Promise<void> {
    const slot = this.#free.length > 0 ? this.#takeBest(tokens) : await new Promise<Slot>((r) => this.#waiting.push(r));
    this.#busy.add(slot.index);
    try {
      await fn(slot);
    } finally {
      this.#busy.delete(slot.index);
      const next = this.#waiting.shift();
      if (next) next(slot);
      else this.#free.push(slot);
    }
  }

  /**
   * The free sequence whose cached tokens share the longest prefix with `tokens` (KV reuse); among
   * equals the lowest sequence id, so busy sequences stay consecutive and llama.cpp decodes them
   * as one micro-batch (see batching.ts).
   */
  #takeBest(tokens: Token[]): Slot {
    let best = 0;
    let bestLength = -1;
    this.#free.forEach((slot, i) => {
      const length = tokens.length === 0 ? 0 : slot.seq.compareContextTokens(tokens).firstDifferentIndex;
      if (length > bestLength || (length === bestLength && slot.index < this.#free[best]!.index)) {
        best = i;
        bestLength = length;
      }
    });
    return this.#free.splice(best, 1)[0] as Slot;
  }

  #grammar(format: OutputFormat | undefined): Promise<LlamaGrammar | undefined> {
    if (format === undefined) return Promise.resolve(undefined);
    const key = format === 'json' ? 'json' : JSON.stringify(format);
    let grammar = this.#grammars.get(key);
    if (!grammar) {
      grammar = (
        format === 'json'
          ? this.#llama.getGrammarFor('json')
          : this.#llama.createGrammarForJsonSchema(format as never).then((g) => g as LlamaGrammar)
      ).catch((err: unknown) => {
        this.#grammars.delete(key);
        throw new RequestError(`invalid format: ${(err as Error).message}`);
      });
      if (this.#grammars.size > 32) this.#grammars.clear();
      this.#grammars.set(key, grammar);
    }
    return grammar;
  }

  #embeddingContext(): Promise<LlamaEmbeddingContext> {
    this.#embedding ??= this.#model
      .createEmbeddingContext({
        contextSize: this.info.contextLength,
        batchSize: this.info.contextLength,
        threads: this.#spec.threads,
      })
      .catch((err: unknown) => {
        this.#embedding = null;
        throw err;
      });
    return this.#embedding;
  }
}

/** Cuts to `dimensions` and L2-normalises (unless told not to). */
function shape(vector: readonly number[], dimensions: number | undefined, normalize: boolean): number[] {
  const v = dimensions && dimensions > 0 && dimensions < vector.length ? vector.slice(0, dimensions) : [...vector];
  if (!normalize) return v;
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  return norm > 0 ? v.map((x) => x / norm) : v;
}
