/**
 * The {@link InferenceService}: the one inference path of the appliance. It resolves the model in
 * the store, layers the model's stored system prompt, messages and parameters under the request,
 * plans the request (plan/request-plan.ts), admits it for its principal, takes a slot from the
 * scheduler and starts the generation on the loaded model. The Ollama routes of this plugin and
 * the OpenAI and Anthropic translators all call it.
 *
 * @module
 */
import { currentPrincipal, Errors } from 'lia/plugin';
import { mayUse } from 'lia/utils';
import type { LoadedModel } from './public.js';
import type { ChatMessage, ChatParams, SamplingOptions } from './public.js';
import type {
  EmbedResponse,
  GenerationStream,
  InferenceChatRequest,
  InferenceEmbedRequest,
  InferenceDetokenizeRequest,
  InferenceGenerateRequest,
  InferenceRerankRequest,
  InferenceService,
  InferenceSpeakRequest,
  InferenceTokenizeRequest,
  InferenceTranscribeRequest,
  KeepAlive,
  LoadedModelInfo,
  RerankResponse,
  SpeechStream,
  SpeechUsage,
  TokenizeResponse,
  TranscriptionResponse,
  TranscriptSegment,
} from './public.js';
import type { FormatHandler, ModelActivity, ModelFile, Speculation } from './public.js';
import type { BackendRegistry } from './backend-registry.js';
import type { ModelStore, ResolvedModel } from 'lia/model-store';
import { decodeWindows, DEFAULT_DECODE_TIMEOUT_MS, DEFAULT_MAX_AUDIO_SECONDS, type DecodeLimits } from './audio.js';
import { admitted, estimateTokens, leased, observed, type Observe } from './admission.js';
import { checkImages, DEFAULT_MAX_IMAGE_BYTES, mediaServed, unsupported } from './images.js';
import { checkAudio } from './audio-input.js';
import { parseKeepAlive } from './keep-alive.js';
import { adaptersServed, planAdapters } from './plan/adapters.js';
import { withContextFit } from './plan/context-fit.js';
import { planChat, planGenerate } from './plan/request-plan.js';
import { planSpeculation, type SpeculationDefaults } from './plan/speculation.js';
import { mergeOptions } from './request-options.js';
import { planSpeech, startSpeech } from './speech.js';
import type { Lease, Scheduler } from './scheduler.js';

export class EngineService implements InferenceService {
  /** False while svc-inference is stopped: every request is a 503. */
  running = true;
  /** The largest image a request may carry, in bytes (decoded); the engine's `maxImageBytes`. */
  maxImageBytes = DEFAULT_MAX_IMAGE_BYTES;
  /** Whether `http(s)` image URLs are fetched (the engine's `remoteImages`); off, they are a 400. */
  remoteImages = false;
  /** How much audio a transcription may carry and how long its decoding may take (the engine's `maxAudioSeconds`). */
  audioLimits: DecodeLimits = { maxSeconds: DEFAULT_MAX_AUDIO_SECONDS, timeoutMs: DEFAULT_DECODE_TIMEOUT_MS };
  /** Speculative decoding's defaults (the engine's `draftModels`, `draftNumPredict`, `draftNgram`). */
  speculation: SpeculationDefaults = { draftModels: {}, draftNumPredict: 3, draftNgram: 0 };
  /** The backends registry, for the request plan's speculation (which engine, the format's vocabulary check); unset: no speculation. */
  backends: BackendRegistry | undefined;
  readonly #stores: { get(): ModelStore };
  /** The store, once asked for: a sole hook's value never changes once provided. */
  #store: ModelStore | undefined;
  readonly #scheduler: Scheduler;
  readonly #observe: Observe;
  readonly #storedOptions = new WeakMap<ResolvedModel, SamplingOptions>();

  /**
   * @param stores the `models` hook (its `get` throws the 503 while no store is provided).
   * @param observe told of requests, tokens and token counts. Defaults to nobody.
   */
  constructor(stores: { get(): ModelStore }, scheduler: Scheduler, observe: Observe = () => {}) {
    this.#stores = stores;
    this.#scheduler = scheduler;
    this.#observe = observe;
  }

  async generate(req: InferenceGenerateRequest, signal: AbortSignal): Promise<GenerationStream> {
    if (req.raw && (req.template || req.system || req.context?.length)) throw Errors.badRequest('raw mode does not support template, system, or context');
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'generate');
    const images = await this.#images(model, req.model, req.images ?? [], 'images');
    const audio = await checkAudio(model, req.model, req.audio ?? [], this.audioLimits, 'audio', signal);
    const plan = planGenerate(model, req.model, req);
    const system = req.system ?? model.system;
    const asker = admitted(model.name, estimateTokens([req.prompt, system, req.suffix]), this.#options(model, req.options), signal);
    const { options } = asker;
    const adapters = planAdapters(model, req.model, options.lora);
    const speculation = await this.#speculation(model, req.model, options, req.options).catch(asker.fail);
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'generate', ...asker.label });
    const { lease, events } = await withContextFit(async (grown) => {
      const lease = await this.#acquire(model, req.keep_alive, { ...options, num_ctx: grown ?? options.num_ctx }, signal, speculation);
      if (images.length > 0) mediaServed(lease, req.model, asker, 'vision');
      if (audio.length > 0) mediaServed(lease, req.model, asker, 'audio');
      served(lease, adapters, req.model);
      const events = lease.model.generate(
        {
          prompt: req.prompt,
          ...(images.length > 0 ? { images } : {}),
          ...(audio.length > 0 ? { audio } : {}),
          raw: req.raw ?? false,
          options,
          ...(system ? { system } : {}),
          ...(req.suffix ? { suffix: req.suffix } : {}),
          ...(req.template ? { template: req.template } : {}),
          ...(req.context?.length ? { context: req.context } : {}),
          ...(adapters ? { adapters } : {}),
          ...plan.fields,
        },
        signal,
      );
      return { lease, events };
    }).catch(asker.fail);
    return {
      model: model.name,
      loadNs: lease.loadNs,
      events: leased(lease, asker.settle, observed(model.name, asker, started, this.#observe, plan.read(events))),
    };
  }

  async chat(req: InferenceChatRequest, signal: AbortSignal): Promise<GenerationStream> {
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'chat');
    const plan = planChat(model, req.model, req);
    const { messages: requested, images, audio } = await this.#messageMedia(model, req.model, req.messages, signal);
    const messages = withStored(model, requested);
    const asker = admitted(model.name, estimateTokens(messages.map((m) => m.content)), this.#options(model, req.options), signal);
    const options = plan.options(asker.options);
    const adapters = planAdapters(model, req.model, options.lora);
    const speculation = await this.#speculation(model, req.model, options, req.options).catch(asker.fail);
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'chat', ...asker.label });
    const conversation = { messages, count: (loaded: LoadedModel, m: ChatMessage[]) => countTokens(loaded, { messages: m, options, ...plan.fields }, signal) };
    const { lease, events } = await withContextFit(async (grown, fitted) => {
      const lease = await this.#acquire(model, req.keep_alive, { ...options, num_ctx: grown ?? options.num_ctx }, signal, speculation);
      if (images > 0) mediaServed(lease, req.model, asker, 'vision');
      if (audio > 0) mediaServed(lease, req.model, asker, 'audio');
      served(lease, adapters, req.model);
      return { lease, events: lease.model.chat({ messages: fitted ?? messages, options, ...(adapters ? { adapters } : {}), ...plan.fields }, signal) };
    }, conversation).catch(asker.fail);
    return {
      model: model.name,
      loadNs: lease.loadNs,
      events: leased(lease, asker.settle, observed(model.name, asker, started, this.#observe, plan.read(events))),
    };
  }

  async countChatTokens(req: InferenceChatRequest, signal: AbortSignal): Promise<{ model: string; promptTokens: number }> {
    const model = await this.#resolve(req.model, 'chat');
    const { fields } = planChat(model, req.model, req);
    const { messages: requested } = await this.#messageMedia(model, req.model, req.messages, signal);
    const options = this.#options(model, req.options);
    const speculation = await this.#speculation(model, req.model, options, req.options);
    const lease = await this.#acquire(model, req.keep_alive, options, signal, speculation);
    const params: ChatParams = { messages: withStored(model, requested), options, ...fields };
    try {
      if (lease.model.countChatTokens) return { model: model.name, promptTokens: await lease.model.countChatTokens(params, signal) };
      // A backend without a count: one greedy token, whose `done` event reports the prompt's length.
      let promptTokens = 0;
      const { constraint: _constraint, toolChoice: _choice, format: _format, ...free } = params;
      const events = lease.model.chat({ ...free, options: { ...options, num_predict: 1, temperature: 0 } }, signal);
      for await (const e of events) if (e.type === 'done') promptTokens = e.promptTokens;
      return { model: model.name, promptTokens };
    } finally {
      lease.release();
    }
  }

  async embed(req: InferenceEmbedRequest, signal: AbortSignal): Promise<EmbedResponse> {
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'embed');
    const asker = admitted(model.name, estimateTokens(req.input), this.#options(model, req.options), signal, 'embed');
    const { options } = asker;
    signal = asker.signal;
    let used: number | undefined;
    this.#observe({ type: 'request', model: model.name, kind: 'embed', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, options, signal).catch(asker.fail);
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
    const asker = admitted(model.name, estimateTokens([req.query, ...req.documents]), this.#options(model, {}), signal, 'embed');
    signal = asker.signal;
    let used: number | undefined;
    this.#observe({ type: 'request', model: model.name, kind: 'rerank', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, asker.options, signal).catch(asker.fail);
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

  /**
   * Text from an audio file on a model with the `transcription` capability, or with `audio` (its
   * backend asks it as a chat, backend-llama-server hearing.ts): the model is
   * resolved and checked before the file is decoded (a key outside the allow-list learns nothing
   * of the file), the file decoded at the model's rate and cut into its windows as ffmpeg goes
   * (audio.ts), each window transcribed in turn while the rest decodes, the previous window's
   * text as its prompt and, once a window with text reported its language (a Whisper model
   * detects it), that language as the later windows' hint unless the client gave one. A window
   * is one segment, or the segments the model timed (Whisper's timestamps). Times are offset by
   * the window's start, so they count from the start of the file. `onSegment` hears of no
   * segment before the whole file has decoded without error, so a file that proves truncated is
   * an error before any segment went out. Admitted like an embedding; counted as a `transcribe`
   * request.
   */
  async transcribe(req: InferenceTranscribeRequest, signal: AbortSignal, onSegment?: (segment: TranscriptSegment) => void): Promise<TranscriptionResponse> {
    const model = await this.#resolve(req.model, 'transcribe');
    const task = req.task ?? 'transcribe';
    const asker = admitted(model.name, 1, this.#options(model, {}), signal, 'embed');
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'transcribe', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, asker.options, signal).catch(asker.fail);
    let tokens = 0;
    try {
      const loaded = lease.model;
      if (!loaded.transcribe || !loaded.audio) throw unsupported(req.model, 'transcription');
      const { sampleRate, windowSeconds } = loaded.audio;
      const audio = decodeWindows(req.audio, sampleRate, Math.max(1, Math.floor(windowSeconds * sampleRate)), this.audioLimits, signal);
      const segments: TranscriptSegment[] = [];
      const words: TranscriptionResponse['words'] = [];
      // The language of the first window with text (what the model detected, unless the client
      // said), handed to the later windows as Whisper's own transcribe does.
      let language = req.language;
      let heard: string | undefined;
      let prompt = req.prompt;
      // Segments wait here until the file has decoded to its end without error.
      let told = 0;
      const tell = () => {
        if (!audio.decoded || !onSegment) return;
        for (; told < segments.length; told++) onSegment(segments[told]!);
      };
      for await (const window of audio) {
        signal.throwIfAborted();
        tell();
        const offset = window.start / sampleRate;
        const result = await loaded.transcribe(
          {
            samples: window.samples,
            task,
            ...(language ? { language } : {}),
            ...(prompt ? { prompt } : {}),
            ...(req.temperature !== undefined ? { temperature: req.temperature } : {}),
          },
          signal,
        );
        heard ??= result.language;
        tokens += result.tokens.length;
        const text = result.text.trim();
        if (text) {
          prompt = text;
          language ??= result.language;
        }
        const timed = result.words.map((w) => ({ word: w.word, start: round(offset + w.start), end: round(offset + w.end) }));
        words.push(...timed);
        if (!text) continue;
        const stretches = result.segments?.length
          ? result.segments.map((s) => ({ start: round(offset + s.start), end: round(offset + s.end), text: s.text.trim(), tokens: s.tokens }))
          : [
              {
                start: timed.length > 0 ? timed[0]!.start : round(offset),
                end: timed.length > 0 ? timed.at(-1)!.end : round(offset + window.length / sampleRate),
                text,
                tokens: result.tokens,
              },
            ];
        for (const stretch of stretches) {
          if (!stretch.text) continue;
          const segment: TranscriptSegment = {
            id: segments.length,
            ...stretch,
            avgLogprob: result.avgLogprob,
            noSpeechProb: result.noSpeechProb,
            seek: window.start,
          };
          segments.push(segment);
        }
        tell();
      }
      tell();
      this.#observe({ type: 'finished', model: model.name, promptTokens: 0, completionTokens: tokens, ...asker.label });
      return {
        model: model.name,
        task,
        // A translation's text is English (OpenAI's translations answer "english" too).
        language: task === 'translate' ? 'en' : (language ?? heard ?? 'en'),
        duration: round(audio.samples / sampleRate),
        sampleRate,
        text: segments.map((s) => s.text).join(' '),
        segments,
        words,
      };
    } finally {
      lease.release();
      asker.done(tokens);
    }
  }

  /**
   * Speech from text on a model with the `speech` capability: the model is resolved and checked
   * and the request read (speech.ts) before the model is loaded; the answer resolves with its
   * first encoded bytes. Admitted like an embedding; counted as a `speech` request, its usage the
   * tokens read and the audio's tokens.
   */
  async speak(req: InferenceSpeakRequest, signal: AbortSignal): Promise<SpeechStream> {
    const model = await this.#resolve(req.model, 'speak');
    const job = planSpeech(req);
    const asker = admitted(model.name, estimateTokens([req.input]), this.#options(model, {}), signal, 'embed');
    signal = asker.signal;
    this.#observe({ type: 'request', model: model.name, kind: 'speech', ...asker.label });
    const lease = await this.#acquire(model, req.keep_alive, asker.options, signal).catch(asker.fail);
    const finish = (usage: SpeechUsage) => {
      lease.release();
      this.#observe({ type: 'finished', model: model.name, promptTokens: usage.inputTokens, completionTokens: usage.outputTokens, ...asker.label });
      asker.done(usage.inputTokens + usage.outputTokens);
    };
    const ffmpeg = this.audioLimits.ffmpeg;
    return startSpeech({ name: model.name, asked: req.model, model: lease.model, finish, ...(ffmpeg ? { ffmpeg } : {}) }, job, signal);
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
    const lease = await this.#acquire(model, keepAlive, {}, signal);
    try {
      return await work(lease.model, model.name);
    } finally {
      lease.release();
    }
  }

  async load(name: string, keepAlive?: KeepAlive): Promise<{ model: string; loadNs: number }> {
    const model = await this.#resolve(name, 'load');
    // A load without a request (an empty prompt) loads with the model's stored draft, as its requests would.
    const speculation = model.capabilities.includes('completion')
      ? await this.#speculation(model, name, this.#options(model, undefined), undefined)
      : undefined;
    const lease = await this.#acquire(model, keepAlive, {}, new AbortController().signal, speculation);
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

  /**
   * A chat's messages with their images checked (and fetched where allowed) and their audio
   * decoded (audio-input.ts), and how many of each there are.
   */
  async #messageMedia(
    model: ResolvedModel,
    asked: string,
    messages: ChatMessage[],
    signal: AbortSignal,
  ): Promise<{ messages: ChatMessage[]; images: number; audio: number }> {
    if (!messages.some((m) => m.images?.length || m.audio?.length)) return { messages, images: 0, audio: 0 };
    let images = 0;
    let audio = 0;
    const out: ChatMessage[] = [];
    for (const [i, m] of messages.entries()) {
      if (!m.images?.length && !m.audio?.length) {
        out.push(m);
        continue;
      }
      const checked = { ...m };
      if (m.images?.length) {
        checked.images = await this.#images(model, asked, m.images, 'messages');
        images += checked.images.length;
      }
      if (m.audio?.length) {
        checked.audio = await checkAudio(model, asked, m.audio, this.audioLimits, `messages[${i}]`, signal);
        audio += checked.audio.length;
      }
      out.push(checked);
    }
    return { messages: out, images, audio };
  }

  /**
   * The model's stored parameters, overridden key by key by the request's options. The stored ones
   * are read once per resolved model: the store hands out the same object while its manifest is
   * unchanged.
   */
  #options(model: ResolvedModel, request: SamplingOptions | undefined): SamplingOptions {
    let stored = this.#storedOptions.get(model);
    if (!stored) this.#storedOptions.set(model, (stored = mergeOptions(model.parameters, undefined)));
    if (!request) return { ...stored };
    const out: SamplingOptions = { ...stored };
    for (const [key, value] of Object.entries(request)) if (value !== undefined) (out as Record<string, unknown>)[key] = value;
    return out;
  }

  async #resolve(
    name: string,
    action: 'generate' | 'chat' | 'embed' | 'rerank' | 'transcribe' | 'speak' | 'tokenize' | 'load' | 'unload',
  ): Promise<ResolvedModel> {
    if (!this.running) throw Errors.unavailable('svc-inference is stopped; start it with POST /system/services/svc-inference/start');
    if (typeof name !== 'string' || name.trim() === '') throw Errors.badRequest('model is required', { param: 'model' });
    // A key's model allow-list, checked on the name asked (before the store is asked, so a key
    // cannot learn which models exist outside its list) and on the name it resolves to.
    const principal = currentPrincipal();
    if (!mayUse(principal, name)) throw notAllowed(name);
    const model = await (this.#store ??= this.#stores.get()).resolve(name);
    if (!mayUse(principal, model.name)) throw notAllowed(name);
    const caps = model.capabilities;
    if (
      (action === 'generate' || action === 'chat') &&
      (caps.includes('embedding') || caps.includes('rerank') || caps.includes('transcription') || caps.includes('speech')) &&
      !caps.includes('completion')
    ) {
      throw Errors.badRequest(`"${name}" does not support ${action}`);
    }
    // A reranker's pooled output is its score, not a vector; a model without the head cannot rank.
    if (action === 'embed' && caps.includes('rerank') && !caps.includes('embedding')) throw unsupported(name, 'embedding');
    if (action === 'rerank' && !caps.includes('rerank')) throw unsupported(name, 'rerank');
    // A model that hears (a GGUF with an audio encoder) transcribes on its backend's chat path.
    if (action === 'transcribe' && !caps.includes('transcription') && !caps.includes('audio')) throw unsupported(name, 'transcription');
    if (action === 'speak' && !caps.includes('speech')) throw unsupported(name, 'speech');
    if (action === 'embed' && (caps.includes('transcription') || caps.includes('speech')) && !caps.includes('embedding')) throw unsupported(name, 'embedding');
    return model;
  }

  /**
   * The request plan's speculative decoding for a request on `model` (plan/speculation.ts): none
   * without the backends registry (an engine set up without it, as in unit tests).
   */
  async #speculation(model: ResolvedModel, asked: string, options: SamplingOptions, requested: SamplingOptions | undefined): Promise<Speculation | undefined> {
    const backends = this.backends;
    if (!backends) return undefined;
    return planSpeculation(model, asked, options, requested, {
      defaults: this.speculation,
      resolve: (name) => (this.#store ??= this.#stores.get()).resolve(name),
      backend: (m) => backends.forModel(m),
      draftFits: fitsOf(backends.handler(model.format)),
    });
  }

  /** A slot of `model`, loaded with the options that size a load (`num_ctx`, `num_gpu`, `kv_cache_type`, `flash_attention`) and the planned speculation. */
  #acquire(
    model: ResolvedModel,
    keepAlive: KeepAlive | undefined,
    load: Pick<SamplingOptions, 'num_ctx' | 'num_gpu' | 'kv_cache_type' | 'flash_attention' | 'num_parallel'>,
    signal: AbortSignal,
    speculation?: Speculation,
  ): Promise<Lease> {
    const keepAliveMs = keepAlive === undefined ? undefined : parseKeepAlive(keepAlive);
    const { num_ctx: numCtx, num_gpu: numGpu, kv_cache_type: kvCacheType, flash_attention: flashAttention, num_parallel: parallel } = load;
    return this.#scheduler.acquire(
      model,
      {
        ...(keepAliveMs !== undefined ? { keepAliveMs } : {}),
        ...(numCtx && numCtx > 0 ? { contextLength: numCtx } : {}),
        ...(numGpu !== undefined ? { numGpu } : {}),
        ...(kvCacheType !== undefined ? { kvCacheType } : {}),
        ...(flashAttention !== undefined ? { flashAttention } : {}),
        ...(parallel !== undefined ? { parallel } : {}),
        ...(speculation ? { speculation } : {}),
      },
      signal,
    );
  }
}

/** A format handler's vocabulary check, bound to it; undefined for a format that takes no draft. */
function fitsOf(handler: FormatHandler | undefined): ((weights: ModelFile, draft: ModelFile) => Promise<string | null>) | undefined {
  if (!handler?.draftFits) return undefined;
  return (weights, draft) => handler.draftFits!(weights, draft);
}

/** The lease's model runs the planned adapters, or the lease is given back and the request is a 400. */
function served(lease: Lease, adapters: ReturnType<typeof planAdapters>, asked: string): void {
  try {
    adaptersServed(lease.model, adapters, asked, lease.engine);
  } catch (err) {
    lease.release();
    throw err;
  }
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

/** A chat's prompt length on a loaded model, 0 when its backend cannot count (then the context doubles). */
function countTokens(model: LoadedModel, params: ChatParams, signal: AbortSignal): Promise<number> {
  return model.countChatTokens ? model.countChatTokens(params, signal) : Promise.resolve(0);
}

function notAllowed(model: string): Error {
  return Errors.forbidden(`this API key may not use the model "${model}"`, { param: 'model' });
}

/** Seconds to the millisecond. */
function round(seconds: number): number {
  return Math.round(seconds * 1000) / 1000;
}
