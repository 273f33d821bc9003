/**
 * The {@link InferenceService}: the one inference path of the appliance. It resolves the model in
 * the store, layers the model's stored system prompt, messages and parameters under the request,
 * takes a slot from the scheduler and starts the generation on the loaded model. The Ollama routes
 * of this plugin and the OpenAI translator both call it.
 *
 * @module
 */
import { currentPrincipal, Errors } from 'lia/plugin';
import { checkImage, checkSchemaBounds, fetchImage, IMAGE_BOUNDS, isRemoteImage, mayUse } from 'lia/utils';
import type { LoadedModel } from 'lia/plugin';
import type { Admission, ChatMessage, ChatParams, GenerationEvent, OutputFormat, SamplingOptions, ToolChoice, ToolDefinition } from 'lia/plugin/contracts';
import type {
  EmbedResponse,
  GenerationStream,
  InferenceChatRequest,
  InferenceEmbedRequest,
  InferenceDetokenizeRequest,
  InferenceGenerateRequest,
  InferenceRerankRequest,
  InferenceService,
  InferenceTokenizeRequest,
  KeepAlive,
  LoadedModelInfo,
  RerankResponse,
  Think,
  TokenizeResponse,
} from 'lia/plugin/contracts';
import type { InferenceEvent, ModelActivity } from 'lia/plugin/contracts';
import type { ModelStore, ResolvedModel } from 'lia/plugin/contracts';
import { parseKeepAlive } from './keep-alive.js';
import { mergeOptions } from './request-options.js';
import { splitThinking } from './thinking.js';
import { withContextGrowth } from './context-growth.js';
import type { Lease, Scheduler } from './scheduler.js';

export class EngineService implements InferenceService {
  /** False while svc-inference is stopped: every request is a 503. */
  running = true;
  /** The largest image a request may carry, in bytes (decoded); the engine's `maxImageBytes`. */
  maxImageBytes = DEFAULT_MAX_IMAGE_BYTES;
  /** Whether `http(s)` image URLs are fetched (the engine's `remoteImages`); off, they are a 400. */
  remoteImages = false;
  readonly #store: () => ModelStore;
  readonly #scheduler: Scheduler;
  readonly #observe: Observe;

  /** @param observe told of requests, tokens and token counts. Defaults to nobody. */
  constructor(store: () => ModelStore, scheduler: Scheduler, observe: Observe = () => {}) {
    this.#store = store;
    this.#scheduler = scheduler;
    this.#observe = observe;
  }

  async generate(req: InferenceGenerateRequest, signal: AbortSignal): Promise<GenerationStream> {
    if (req.raw && (req.template || req.system || req.context?.length)) throw Errors.badRequest('raw mode does not support template, system, or context');
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'generate');
    const images = await this.#images(model, req.model, req.images ?? [], 'images');
    const think = thinks(model, req.think, req.model);
    const system = req.system ?? model.system;
    const asker = admitted(model.name, estimateTokens([req.prompt, system, req.suffix]), mergeOptions(model.parameters, req.options), signal);
    const { options } = asker;
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'generate', ...asker.label });
    const { lease, events } = await withContextGrowth(async (grown) => {
      const lease = await this.#acquire(model, req.keep_alive, grown ?? options.num_ctx, signal);
      if (images.length > 0) visionServed(lease, req.model, asker);
      const events = lease.model.generate(
        {
          prompt: req.prompt,
          ...(images.length > 0 ? { images } : {}),
          raw: req.raw ?? false,
          options,
          ...(system ? { system } : {}),
          ...(req.suffix ? { suffix: req.suffix } : {}),
          ...(req.template ? { template: req.template } : {}),
          ...(req.context?.length ? { context: req.context } : {}),
          ...(req.logprobs !== undefined ? { logprobs: req.logprobs } : {}),
          ...(req.stream === false ? { whole: true } : {}),
          ...thinkField(req.think, think),
          ...formatField(req.format),
        },
        signal,
      );
      return { lease, events };
    }).catch(asker.fail);
    return {
      model: model.name,
      loadNs: lease.loadNs,
      events: leased(lease, asker.settle, observed(model.name, asker, started, this.#observe, think ? splitThinking(events) : events)),
    };
  }

  async chat(req: InferenceChatRequest, signal: AbortSignal): Promise<GenerationStream> {
    const tools = toolFields(req.tools, req.toolChoice);
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'chat');
    const { messages: requested, images } = await this.#messageImages(model, req.model, req.messages);
    const think = thinks(model, req.think, req.model);
    const messages = withStored(model, requested);
    const asker = admitted(model.name, estimateTokens(messages.map((m) => m.content)), mergeOptions(model.parameters, req.options), signal);
    const { options } = asker;
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'chat', ...asker.label });
    const count = (loaded: LoadedModel) => (loaded.countChatTokens ? loaded.countChatTokens({ messages, options, ...tools }, signal) : Promise.resolve(0));
    const { lease, events } = await withContextGrowth(async (grown) => {
      const lease = await this.#acquire(model, req.keep_alive, grown ?? options.num_ctx, signal);
      if (images > 0) visionServed(lease, req.model, asker);
      const events = lease.model.chat(
        {
          messages,
          options,
          ...tools,
          ...formatField(req.format),
          ...(req.logprobs !== undefined ? { logprobs: req.logprobs } : {}),
          ...(req.stream === false ? { whole: true } : {}),
          ...thinkField(req.think, think),
        },
        signal,
      );
      return { lease, events };
    }, count).catch(asker.fail);
    return {
      model: model.name,
      loadNs: lease.loadNs,
      events: leased(lease, asker.settle, observed(model.name, asker, started, this.#observe, think ? splitThinking(events) : events)),
    };
  }

  async countChatTokens(req: InferenceChatRequest, signal: AbortSignal): Promise<{ model: string; promptTokens: number }> {
    const tools = toolFields(req.tools, req.toolChoice);
    const model = await this.#resolve(req.model, 'chat');
    const { messages: requested } = await this.#messageImages(model, req.model, req.messages);
    const options = mergeOptions(model.parameters, req.options);
    const lease = await this.#acquire(model, req.keep_alive, options.num_ctx, signal);
    const params: ChatParams = { messages: withStored(model, requested), options, ...tools, ...thinkField(req.think, thinks(model, req.think, req.model)) };
    try {
      if (lease.model.countChatTokens) return { model: model.name, promptTokens: await lease.model.countChatTokens(params, signal) };
      // A backend without a count: one greedy token, whose `done` event reports the prompt's length.
      let promptTokens = 0;
      const events = lease.model.chat({ ...params, toolChoice: 'auto', options: { ...options, num_predict: 1, temperature: 0 } }, signal);
      for await (const e of events) if (e.type === 'done') promptTokens = e.promptTokens;
      return { model: model.name, promptTokens };
    } finally {
      lease.release();
    }
  }

  async embed(req: InferenceEmbedRequest, signal: AbortSignal): Promise<EmbedResponse> {
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'embed');
    const asker = admitted(model.name, estimateTokens(req.input), mergeOptions(model.parameters, req.options), signal, 'embed');
    const { options } = asker;
    signal = asker.signal;
    let used: number | undefined;
    this.#observe({ type: 'request', model: model.name, kind: 'embed', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, options.num_ctx, signal).catch(asker.fail);
    try {
      const result =
        req.input.length === 0
          ? { embeddings: [], promptTokens: 0 }
          : await lease.model.embed(
              {
                inputs: req.input,
                truncate: req.truncate ?? true,
                normalize: req.normalize ?? true,
                ...(req.dimensions ? { dimensions: req.dimensions } : {}),
              },
              signal,
            );
      used = result.promptTokens;
      this.#observe({ type: 'finished', model: model.name, promptTokens: result.promptTokens, completionTokens: 0, ...asker.label });
      return {
        model: model.name,
        embeddings: result.embeddings,
        promptTokens: result.promptTokens,
        loadNs: lease.loadNs,
        totalNs: Number(process.hrtime.bigint() - started),
      };
    } finally {
      lease.release();
      asker.done(used);
    }
  }

  /** Scores documents for a query on a model with the `rerank` capability; admitted like an embedding. */
  async rerank(req: InferenceRerankRequest, signal: AbortSignal): Promise<RerankResponse> {
    const model = await this.#resolve(req.model, 'rerank');
    const asker = admitted(model.name, estimateTokens([req.query, ...req.documents]), mergeOptions(model.parameters, {}), signal, 'embed');
    signal = asker.signal;
    let used: number | undefined;
    this.#observe({ type: 'request', model: model.name, kind: 'rerank', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, asker.options.num_ctx, signal).catch(asker.fail);
    try {
      if (!lease.model.rank) throw unsupported(req.model, 'rerank');
      const result =
        req.documents.length === 0
          ? { scores: [], promptTokens: 0 }
          : await lease.model.rank({ query: req.query, documents: req.documents, truncate: req.truncate ?? true }, signal);
      used = result.promptTokens;
      this.#observe({ type: 'finished', model: model.name, promptTokens: result.promptTokens, completionTokens: 0, ...asker.label });
      return { model: model.name, scores: result.scores, promptTokens: result.promptTokens };
    } finally {
      lease.release();
      asker.done(used);
    }
  }

  /** llama-server's `/tokenize` on any local model (loads it if needed; not counted as inference). */
  async tokenize(req: InferenceTokenizeRequest, signal: AbortSignal): Promise<TokenizeResponse> {
    return this.#withTokenizer(req.model, req.keep_alive, signal, async (loaded, name) => {
      if (!loaded.tokenize) throw unsupported(req.model, 'tokenize');
      const params = {
        content: req.content,
        addSpecial: req.add_special ?? false,
        parseSpecial: req.parse_special ?? true,
        withPieces: req.with_pieces ?? false,
      };
      return { model: name, ...(await loaded.tokenize(params, signal)) };
    });
  }

  /** llama-server's `/detokenize`: token ids back to text. */
  async detokenize(req: InferenceDetokenizeRequest, signal: AbortSignal): Promise<{ model: string; content: string }> {
    return this.#withTokenizer(req.model, req.keep_alive, signal, async (loaded, name) => {
      if (!loaded.detokenize) throw unsupported(req.model, 'detokenize');
      return { model: name, content: req.tokens.length === 0 ? '' : await loaded.detokenize(req.tokens, signal) };
    });
  }

  async #withTokenizer<T>(
    name: string,
    keepAlive: KeepAlive | undefined,
    signal: AbortSignal,
    work: (model: LoadedModel, name: string) => Promise<T>,
  ): Promise<T> {
    const model = await this.#resolve(name, 'tokenize');
    const lease = await this.#acquire(model, keepAlive, undefined, signal);
    try {
      return await work(lease.model, model.name);
    } finally {
      lease.release();
    }
  }

  async load(name: string, keepAlive?: KeepAlive): Promise<{ model: string; loadNs: number }> {
    const model = await this.#resolve(name, 'load');
    const lease = await this.#acquire(model, keepAlive, undefined, new AbortController().signal);
    lease.release();
    return { model: model.name, loadNs: lease.loadNs };
  }

  async unload(name: string): Promise<void> {
    const model = await this.#resolve(name, 'unload');
    await this.#scheduler.unload(model.name);
  }

  unloadAll(): Promise<void> {
    return this.#scheduler.unloadAll();
  }

  ps(): LoadedModelInfo[] {
    return this.#scheduler.ps();
  }

  activity(): ModelActivity[] {
    return this.#scheduler.activity();
  }

  /** Queue depth, busy slots and loaded models (for status pages and tests). */
  stats(): { queued: number; active: number; loaded: number } {
    return this.#scheduler.stats();
  }

  /** A request's images, checked (and fetched where allowed): see {@link checkImages}. */
  #images(model: ResolvedModel, asked: string, images: readonly string[], param: string): Promise<string[]> {
    return checkImages(model, asked, images, { maxBytes: this.maxImageBytes, remote: this.remoteImages }, param);
  }

  /** A chat's messages with their images checked (and fetched where allowed), and how many there are. */
  async #messageImages(model: ResolvedModel, asked: string, messages: ChatMessage[]): Promise<{ messages: ChatMessage[]; images: number }> {
    if (!messages.some((m) => m.images?.length)) return { messages, images: 0 };
    let images = 0;
    const out: ChatMessage[] = [];
    for (const m of messages) {
      if (!m.images?.length) {
        out.push(m);
        continue;
      }
      const checked = await this.#images(model, asked, m.images, 'messages');
      images += checked.length;
      out.push({ ...m, images: checked });
    }
    return { messages: out, images };
  }

  async #resolve(name: string, action: 'generate' | 'chat' | 'embed' | 'rerank' | 'tokenize' | 'load' | 'unload'): Promise<ResolvedModel> {
    if (!this.running) throw Errors.unavailable('svc-inference is stopped; start it with POST /system/services/svc-inference/start');
    if (typeof name !== 'string' || name.trim() === '') throw Errors.badRequest('model is required', { param: 'model' });
    // A key's model allow-list, checked on the name asked (before the store is asked, so a key
    // cannot learn which models exist outside its list) and on the name it resolves to.
    const principal = currentPrincipal();
    if (!mayUse(principal, name)) throw notAllowed(name);
    const model = await this.#store().resolve(name);
    if (!mayUse(principal, model.name)) throw notAllowed(name);
    const caps = model.capabilities;
    if ((action === 'generate' || action === 'chat') && (caps.includes('embedding') || caps.includes('rerank')) && !caps.includes('completion')) {
      throw Errors.badRequest(`"${name}" does not support ${action}`);
    }
    // A reranker's pooled output is its score, not a vector; a model without the head cannot rank.
    if (action === 'embed' && caps.includes('rerank') && !caps.includes('embedding')) throw unsupported(name, 'embedding');
    if (action === 'rerank' && !caps.includes('rerank')) throw unsupported(name, 'rerank');
    return model;
  }

  #acquire(model: ResolvedModel, keepAlive: KeepAlive | undefined, numCtx: number | undefined, signal: AbortSignal): Promise<Lease> {
    const keepAliveMs = parseKeepAlive(keepAlive);
    return this.#scheduler.acquire(
      model,
      { ...(keepAliveMs !== undefined ? { keepAliveMs } : {}), ...(numCtx && numCtx > 0 ? { contextLength: numCtx } : {}) },
      signal,
    );
  }
}

/**
 * `tools` and `toolChoice` as the backend gets them: `none` drops the tools, `auto` is left out
 * (the default), and a forced choice is checked here, before a model is loaded for it.
 */
export function toolFields(tools: ToolDefinition[] | undefined, choice: ToolChoice | undefined): Pick<ChatParams, 'tools' | 'toolChoice'> {
  if (choice === 'none' || !tools || tools.length === 0) {
    if (choice === 'required' || (typeof choice === 'object' && choice !== null)) {
      throw Errors.badRequest('a required or named tool choice needs tools', { param: 'tool_choice' });
    }
    return {};
  }
  tools.forEach((t, i) => t.function.parameters && checkSchemaBounds(t.function.parameters, `tools[${i}].function.parameters`));
  if (choice === undefined || choice === 'auto') return { tools };
  if (choice === 'required') return { tools, toolChoice: 'required' };
  if (typeof choice === 'object' && choice !== null && typeof choice.name === 'string') {
    if (!tools.some((t) => t.function.name === choice.name)) {
      throw Errors.badRequest(`tool choice "${choice.name}" is not one of the tools`, { param: 'tool_choice' });
    }
    return { tools, toolChoice: { name: choice.name } };
  }
  throw Errors.badRequest(`invalid tool choice: ${JSON.stringify(choice)}`, { param: 'tool_choice' });
}

/** A chat's messages under the model's stored system prompt (unless the request brings one) and stored messages. */
function withStored(model: ResolvedModel, requested: ChatMessage[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (model.system && requested[0]?.role !== 'system') messages.push({ role: 'system', content: model.system });
  for (const m of model.messages) {
    if (m.role === 'system' || m.role === 'user' || m.role === 'assistant') messages.push({ role: m.role, content: m.content });
  }
  messages.push(...requested);
  return messages;
}

/**
 * Whether the output is split into thinking and answer (see thinking.ts): `think` true or a level
 * on a model with the `thinking` capability (without it: Ollama's 400), or `'auto'` where it has it.
 */
function thinks(model: ResolvedModel, think: Think | undefined, asked: string): boolean {
  if (think === undefined || think === false) return false;
  const capable = model.capabilities.includes('thinking');
  if (think === 'auto') return capable;
  if (!capable) throw Errors.badRequest(`"${asked}" does not support thinking`, { param: 'think' });
  return true;
}

/**
 * `think` as the backend gets it: false when the request switched thinking off (the prompt then
 * asks the model not to think, where its template can), true when the output is split, else unset
 * (the template's default).
 */
function thinkField(think: Think | undefined, split: boolean): { think?: boolean } {
  if (think === false) return { think: false };
  return split ? { think: true } : {};
}

/** The output format as the backend gets it; a schema is bounded here too, whichever surface sent it. */
function formatField(format: OutputFormat | undefined | null | ''): { format?: OutputFormat } {
  if (format && typeof format === 'object') checkSchemaBounds(format, 'format');
  return format === undefined || format === null || format === '' ? {} : { format };
}

type Observe = (event: InferenceEvent) => void;

/** The largest image a request may carry by default: 5 MiB (decoded), Anthropic's limit per image. */
export const DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/**
 * A request's images before a model is loaded for them: the model able to see (the `vision`
 * capability, which a projector layer gives), a remote URL fetched where the operator allows it
 * (`remoteImages`; else a 400, as fetching what a client names reaches the appliance's network),
 * and each image well-formed and within the size limit (`checkImage`). Returns them as base64.
 */
async function checkImages(
  model: ResolvedModel,
  asked: string,
  images: readonly string[],
  o: { maxBytes: number; remote: boolean },
  param: string,
): Promise<string[]> {
  if (images.length === 0) return [];
  if (!model.capabilities.includes('vision')) throw unsupported(asked, 'vision');
  const out: string[] = [];
  let pixels = 0;
  for (const image of images) {
    if (typeof image !== 'string') throw Errors.badRequest('an image must be base64 text', { param });
    let data = image;
    if (isRemoteImage(image)) {
      if (!o.remote) throw Errors.badRequest('remote image URLs are not fetched; send the image inline as base64 (a data: URL)', { param });
      data = await fetchImage(image, o.maxBytes, param);
    }
    const { width, height } = checkImage(data, o.maxBytes, param);
    pixels += width * height;
    if (pixels > IMAGE_BOUNDS.requestPixels)
      throw Errors.badRequest(`the request's images are over ${IMAGE_BOUNDS.requestPixels / 1e6} megapixels in all`, { param });
    out.push(data);
  }
  return out;
}

/**
 * The loaded model takes images: the backend that runs it serves `vision` (a model with a
 * projector on a backend without it, when no enabled backend takes images, is a 400 saying what
 * to enable). Releases the slot and the admission when it does not.
 */
function visionServed(lease: Lease, asked: string, asker: Admitted): void {
  if (lease.model.capabilities.includes('vision')) return;
  lease.release();
  asker.fail(
    Errors.badRequest(`"${asked}" has a vision projector, but the backend that runs it takes no images; enable backend-llama-server (docs/backends.md)`, {
      param: 'model',
    }),
  );
}

/** A 400 naming the capability a model lacks (as `/api/show` lists them). */
function unsupported(model: string, capability: string): Error {
  return Errors.badRequest(`"${model}" does not support ${capability} (the "${capability}" capability in /api/show)`, { param: 'model' });
}

function notAllowed(model: string): Error {
  return Errors.forbidden(`this API key may not use the model "${model}"`, { param: 'model' });
}

/** The asking principal's admission for one request: its label for events, and its release. */
interface Admitted {
  label: { principal?: string };
  /** The prompt's tokens as estimated before it was tokenized ({@link estimateTokens}). */
  promptTokens: number;
  /** The request's options, `num_predict` lowered to the principal's cap. */
  options: SamplingOptions;
  /** The request's signal, also aborted when the principal's credential is withdrawn (revoked, rotated). */
  signal: AbortSignal;
  /** Called once the request is over, with the tokens it used when known; idempotent. */
  done: (usedTokens?: number) => void;
  /** {@link done} for a generation: its counts when it reported them, else the estimate and the tokens seen. */
  settle: (counts: { promptTokens: number; completionTokens: number } | null, tokensSeen: number) => void;
  /** Releases, then rethrows (for a failure before the generation starts). */
  fail: (err: unknown) => never;
}

/** A prompt's tokens before it is tokenized: one per 4 characters, rounded up (the usual rule of thumb for BPE vocabularies). */
function estimateTokens(texts: ReadonlyArray<string | undefined>): number {
  return texts.reduce((sum, t) => sum + Math.ceil((t?.length ?? 0) / 4), 0);
}

/**
 * Admits the request for the current principal (`Principal.admit`: rate limits, concurrent
 * streams, a cap on the tokens generated), which throws to refuse it. Outside a request, or for a
 * principal without limits, everything is admitted. An embedding generates nothing (`maxTokens` 0).
 */
function admitted(model: string, promptTokens: number, options: SamplingOptions, signal: AbortSignal, kind: 'generation' | 'embed' = 'generation'): Admitted {
  const principal = currentPrincipal();
  const embedding = kind === 'embed';
  const asked = embedding ? 0 : options.num_predict !== undefined && options.num_predict >= 0 ? options.num_predict : null;
  const granted = principal?.admit?.(model, { promptTokens, maxTokens: asked });
  const admission: Admission | undefined = typeof granted === 'function' ? { release: granted } : granted;
  const cap = admission?.maxTokens;
  const capped = embedding || cap === undefined || (asked !== null && asked <= cap) ? options : { ...options, num_predict: cap };
  let released = false;
  const done = (usedTokens?: number): void => {
    if (released) return;
    released = true;
    admission?.release(usedTokens);
  };
  return {
    label: principal ? { principal: principal.id } : {},
    promptTokens,
    options: capped,
    signal: principal?.signal ? AbortSignal.any([signal, principal.signal]) : signal,
    done,
    settle: (counts, seen) => done(counts ? counts.promptTokens + counts.completionTokens : promptTokens + seen),
    fail: (err) => {
      done();
      throw err;
    },
  };
}

/**
 * Reports a generation's first token (time since `started`, queue and load included), the gaps
 * between its tokens, and its token counts when it is done. A stream that ends without its `done`
 * event (its client left, the drain aborted it, the engine failed) is reported finished with the
 * tokens it produced and the prompt's estimate, so usage counts what it cost. Text never leaves
 * this function.
 */
function observed(
  model: string,
  asker: Pick<Admitted, 'label' | 'promptTokens'>,
  started: bigint,
  observe: Observe,
  source: AsyncIterable<GenerationEvent>,
): AsyncIterable<GenerationEvent> {
  const { label } = asker;
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let last: bigint | null = null;
      let tokens = 0;
      let finished = false;
      const cut = () => {
        if (finished) return;
        finished = true;
        observe({ type: 'finished', model, promptTokens: asker.promptTokens, completionTokens: tokens, ...label });
      };
      return {
        async next() {
          let r: IteratorResult<GenerationEvent>;
          try {
            r = await it.next();
          } catch (err) {
            cut();
            throw err;
          }
          if (r.done) {
            cut();
            return r;
          }
          const event = r.value;
          if (event.type === 'token') {
            tokens++;
            const now = process.hrtime.bigint();
            if (last === null) observe({ type: 'first-token', model, seconds: Number(now - started) / 1e9 });
            else observe({ type: 'token-gap', model, seconds: Number(now - last) / 1e9 });
            last = now;
          } else if (event.type === 'done' && !finished) {
            finished = true;
            observe({ type: 'finished', model, promptTokens: event.promptTokens, completionTokens: event.completionTokens, ...label });
          }
          return r;
        },
        async return(value?: unknown) {
          cut();
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}

/**
 * Gives the slot back, and tells the principal's admission, as soon as the generation is over: on
 * its `done` event (with its token counts), on an error, or when the consumer stops iterating (also
 * when it never started; then with the tokens seen so far).
 */
function leased(lease: Lease, settle: Admitted['settle'], source: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let seen = 0;
      return {
        async next() {
          try {
            const r = await it.next();
            if (!r.done && r.value.type === 'token') seen++;
            if (r.done || r.value.type === 'done') {
              lease.release();
              settle(!r.done && r.value.type === 'done' ? r.value : null, seen);
            }
            return r;
          } catch (err) {
            lease.release();
            settle(null, seen);
            throw err;
          }
        },
        async return(value?: unknown) {
          lease.release();
          settle(null, seen);
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}
