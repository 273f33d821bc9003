/**
 * The inference backend contract. A backend turns a {@link ResolvedModel} into a
 * {@link LoadedModel} that can generate, chat or embed. The llama.cpp backend
 * (`plugins/backend-llama-cpp`) and the transformers.js backend (`plugins/backend-transformers`)
 * implement it; the scheduler (`plugins/engine`) owns their lifecycle, so the contract is the engine's
 * (`lia/engine`). Third-party backends register the same way, in the engine's `backends` hook:
 *
 * ```ts
 * export default definePlugin({
 *   name: 'backend-mine',
 *   apiVersion: 2,
 *   dependencies: ['engine'],
 *   async setup(app, ctx) { ctx.hooks.extensions.get('backends').register(myBackend, ctx.name) },
 * })
 * ```
 *
 * @module
 */
import type { ModelCapability, ModelDetails, ModelFormat, ResolvedModel } from 'lia/model-store';

/** Sampling and length options, with Ollama's names. Unknown keys are ignored upstream. */
export interface SamplingOptions {
  temperature?: number;
  top_k?: number;
  top_p?: number;
  min_p?: number;
  seed?: number;
  num_predict?: number;
  num_ctx?: number;
  /** Layers to offload to a GPU (Ollama's `num_gpu`): 0 keeps the model on the CPU; absent or negative: as many as fit. Sizes the load, not the sampling. */
  num_gpu?: number;
  /**
   * The KV cache's element type (llama.cpp's `-ctk/-ctv`, Ollama's `OLLAMA_KV_CACHE_TYPE`): `f16`,
   * `q8_0` (half the memory) or `q4_0` (a quarter). Sizes the load, like `num_ctx`.
   */
  kv_cache_type?: KvCacheType;
  /** Flash attention on or off (llama.cpp's `-fa`, Ollama's `OLLAMA_FLASH_ATTENTION`); absent: the engine decides (`auto`). Sizes the load. */
  flash_attention?: boolean;
  /** Requests this model serves at once (its slots; Ollama's server-wide `OLLAMA_NUM_PARALLEL`, llama-server's `-np`); absent: the engine's `numParallel`. Sizes the load. */
  num_parallel?: number;
  /**
   * Per-request LoRA scales, as llama-server takes them: `id` indexes the model's adapters
   * (`ResolvedModel.adapters`), an adapter left out is off (scale 0). Absent: every adapter of
   * the model at scale 1.
   */
  lora?: Array<{ id: number; scale: number }>;
  /**
   * Speculative decoding with a draft model: the name of a stored model with the same vocabulary
   * (Modelfile `DRAFT`; LM Studio's `draft_model`, llama-server's `--spec-draft-model`). Sizes the load.
   */
  draft_model?: string;
  /**
   * Tokens drafted per step at most (Ollama's `draft_num_predict`, llama-server's
   * `--spec-draft-n-max`); 0 switches speculation off. Sizes the load.
   */
  draft_num_predict?: number;
  /**
   * Speculative decoding by n-gram lookup in the prompt and the answer so far (no draft model): the
   * length of the n-gram looked up (llama-server's `--spec-type ngram-simple`,
   * `--spec-ngram-simple-size-n`); 0: off. Sizes the load.
   */
  draft_ngram?: number;
  stop?: string[];
  repeat_penalty?: number;
  repeat_last_n?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
}

/** A tool the model may call (OpenAI/Ollama function shape). */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

/** A tool call the model made; returned to the client, never executed. */
export interface ToolCall {
  id?: string;
  /** `index` is the call's position among the calls of one turn (Ollama sends it). */
  function: { index?: number; name: string; arguments: Record<string, unknown> };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  tool_calls?: ToolCall[];
  /** For `tool` messages: the name of the tool that produced the content. */
  tool_name?: string;
  /**
   * Images the message carries, base64 (Ollama's `images`), checked by the engine (see
   * `checkImage`); only a model with the `vision` capability gets them.
   */
  images?: string[];
  /**
   * Audio clips the message carries, base64: as the engine hands them to a backend, each is a
   * 16 kHz mono 16-bit PCM WAV (the engine decodes and resamples what the client sent, see
   * `checkAudio`); only a model with the `audio` capability gets them.
   */
  audio?: string[];
}

/**
 * Whether and which tool the model must call (OpenAI's `tool_choice`; Ollama has no such field):
 *
 * - `'auto'` (the default): the model decides; it may answer with text or call any of `tools`;
 * - `'none'`: no tool call (callers normally just leave `tools` out);
 * - `'required'`: exactly one call of one of `tools`, enforced by a JSON-schema grammar;
 * - `{ name }`: exactly one call of that tool, enforced the same way.
 *
 * `'required'` and `{ name }` need a non-empty `tools` (and `{ name }` a tool of that name).
 */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string };

/** A token and its log probability: the natural log of the probability the sampler gave it. */
export interface TokenLogprob {
  /** The token's text (a piece of a multi-byte character reads as U+FFFD; `bytes` are exact where the text is whole). */
  token: string;
  /** At most 0. */
  logprob: number;
  /** The UTF-8 bytes of `token`. */
  bytes: number[];
}

/** A generated token's log probability and the most likely tokens at its position, most likely first. */
export interface GeneratedLogprob extends TokenLogprob {
  top_logprobs: TokenLogprob[];
}

/** Structured-output constraint: `'json'` (any JSON) or a JSON schema object. */
export type OutputFormat = 'json' | Record<string, unknown>;

/**
 * What the whole answer is sampled under, decided once by the engine's request plan for a local
 * model: an output format, or a forced tool call (`toolChoice` `'required'` or named), both a JSON
 * schema in the subset every GGUF engine compiles alike (docs/backends.md, *One request plan*).
 * A backend given one renders the prompt as always (the messages, the `tools` documented,
 * `think`), samples the answer as a raw completion of that prompt under the grammar, and streams
 * it as `token` events; it leaves `format` and `toolChoice` alone (the plan turned them into this)
 * and parses no call: the plan turns a forced call's text into the `tool_calls` event. A backend
 * that forwards to another server (a remote model) is given `format` and `toolChoice` instead.
 */
export interface AnswerConstraint {
  /** `'json'`: any JSON object; else the schema. */
  schema: 'json' | Record<string, unknown>;
  /** The schema as llama.cpp's GBNF grammar, which every GGUF engine samples under as it is. */
  grammar: string;
}

export interface GenerateParams {
  /** Text to continue. With `raw` false the backend applies the chat template around it. */
  prompt: string;
  system?: string;
  /** Text after the insertion point (fill-in-the-middle), where the model supports it. */
  suffix?: string;
  /** Images for the prompt, base64 (see {@link ChatMessage.images}). */
  images?: string[];
  /** Audio for the prompt, base64 WAV (see {@link ChatMessage.audio}). */
  audio?: string[];
  raw: boolean;
  /**
   * A prompt template (Ollama Go-template text, e.g. the request's `template` field) used instead
   * of the model's own chat template. Ignored when `raw` is true.
   */
  template?: string;
  format?: OutputFormat;
  /** See {@link ChatParams.constraint}; set instead of `format` for a local model. */
  constraint?: AnswerConstraint;
  options: SamplingOptions;
  /**
   * Token ids of an earlier exchange (a previous `done` event's `context`), evaluated before the
   * prompt. Ignored with `raw` (the engine refuses the combination).
   */
  context?: number[];
  /**
   * Asks for log probabilities: each `token` (and `thinking`) event then carries `logprobs`, one
   * entry per generated token whose text it completes, each with this many alternatives (0 to 20).
   * Unset (the default): none. Not available with `suffix` or with tools (a 400).
   */
  logprobs?: number;
  /** See {@link ChatParams.whole}. */
  whole?: boolean;
  /** See {@link ChatParams.think}. */
  think?: boolean;
  /** See {@link ChatParams.adapters}. */
  adapters?: readonly AdapterScale[];
}

export interface ChatParams {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  /** Forces a tool call (see {@link ToolChoice}). Defaults to `'auto'`. */
  toolChoice?: ToolChoice;
  format?: OutputFormat;
  /** The schema the answer is sampled under (see {@link AnswerConstraint}); set instead of `format` and a forced `toolChoice` for a local model. */
  constraint?: AnswerConstraint;
  options: SamplingOptions;
  /**
   * Asks for log probabilities: each `token` (and `thinking`) event then carries `logprobs`, one
   * entry per generated token whose text it completes, each with this many alternatives (0 to 20).
   * Unset (the default): none. Not available with `suffix` or with tools (a 400).
   */
  logprobs?: number;
  /**
   * The client gets the answer in one piece at the end (it did not ask for a stream), so a backend
   * may restart a generation that failed half-way (elsewhere, as the upstream backend does with
   * its replicas) and yield only a complete one. Defaults to false: events go out as they come.
   */
  whole?: boolean;
  /**
   * Whether a thinking model should think: `false` renders the prompt with its thinking switched
   * off where the chat template can (Qwen3's `enable_thinking=false`), `true` with it on. Unset:
   * the template's own default. Either way the backend emits the model's text as it is (a
   * reasoning section between `<think>` and `</think>` included); the engine splits it.
   */
  think?: boolean;
  /**
   * The LoRA adapters this request runs with, each with its scale (the request plan's decision);
   * any other adapter the loaded model holds is off for it. Unset: the model has none.
   */
  adapters?: readonly AdapterScale[];
}

/** A LoRA adapter file and the scale it is applied at (0: off). */
export interface AdapterScale {
  path: string;
  scale: number;
}

/** One event of a generation stream. The last one is always `done`. */
export type GenerationEvent =
  /** Answer text; `logprobs` when the request asked for them (see {@link GenerateParams.logprobs}). */
  | { type: 'token'; text: string; logprobs?: GeneratedLogprob[] }
  /**
   * Reasoning text, apart from the answer. Backends emit only `token`; the engine splits a thinking
   * model's output into `thinking` and `token` events when the request asked for it (`think`).
   */
  | { type: 'thinking'; text: string; logprobs?: GeneratedLogprob[] }
  | { type: 'tool_calls'; calls: ToolCall[] }
  | {
      type: 'done';
      reason: 'stop' | 'length';
      /**
       * The request's stop sequence (`options.stop`) that ended the text, when one did (reason
       * `stop`); absent when the model ended its turn itself. Backends without text-level stop
       * sequences leave it out.
       */
      stopSequence?: string;
      promptTokens: number;
      /**
       * Of `promptTokens`, those the backend found already in its cache (its own sequence's, or
       * copied from another sequence's) and did not evaluate again; absent where the backend does
       * not know. OpenAI's `usage.prompt_tokens_details.cached_tokens`.
       */
      cachedTokens?: number;
      completionTokens: number;
      /** Nanoseconds spent on the prompt and on decoding. */
      promptEvalNs: number;
      evalNs: number;
      /**
       * Generate only, where the backend can: the token ids of the whole exchange (the request's
       * `context`, the prompt as evaluated without BOS, the answer), to send back as `context`.
       */
      context?: number[];
      /**
       * Speculative decoding, where the model was loaded with it (see {@link Speculation}): tokens
       * drafted for this answer and, of them, those the model accepted (llama-server's
       * `timings.draft_n` and `draft_n_accepted`). Absent without speculation.
       */
      draft?: { tokens: number; accepted: number };
    };

export interface EmbedParams {
  inputs: string[];
  /** Cut inputs longer than the context (true) or fail with a 400 (false). Defaults to true. */
  truncate: boolean;
  /** Keep only the first N dimensions (then re-normalise). */
  dimensions?: number;
  /**
   * L2-normalise the vectors (Ollama `/api/embed`, OpenAI). The legacy `/api/embeddings` asks for
   * raw vectors with `false`. Defaults to true.
   */
  normalize?: boolean;
}

export interface EmbedResult {
  /** Vectors, one per input, in input order; L2-normalised unless `normalize` was false. */
  embeddings: number[][];
  promptTokens: number;
}

/** What {@link LoadedModel.rank} scores: one query against each of the documents. */
export interface RankParams {
  query: string;
  documents: string[];
  /**
   * Cut a query and document pair longer than the model's context to fit (true), or fail with a
   * 400 (false). Defaults to true.
   */
  truncate: boolean;
}

export interface RankResult {
  /**
   * One relevance score per document, in document order: the probability (0 to 1) the model gives
   * that the document answers the query (the sigmoid of a one-logit classifier head).
   */
  scores: number[];
  /** Tokens evaluated: every query and document pair with its special tokens. */
  promptTokens: number;
}

/** How a speech model takes its audio ({@link LoadedModel.audio}). */
export interface AudioInput {
  /** The sample rate the model reads, in Hz (16000 for wav2vec2 and Whisper). */
  readonly sampleRate: number;
  /**
   * The longest audio one {@link LoadedModel.transcribe} call takes, in seconds. The engine cuts
   * longer audio into windows of at most this length (at the quietest moment near each window's
   * end) and puts the answers together with their times offset.
   */
  readonly windowSeconds: number;
}

/** What {@link LoadedModel.transcribe} is asked: one window of audio. */
export interface TranscribeParams {
  /** Mono samples in [-1, 1] at {@link AudioInput.sampleRate}, at most {@link AudioInput.windowSeconds} long. */
  samples: Float32Array;
  /** `translate`: English text whatever the language spoken, where the model can; else the transcript. */
  task: 'transcribe' | 'translate';
  /** The language spoken (ISO-639-1), when the client says. */
  language?: string;
  /** Text that came before (the previous window's transcript, or the client's `prompt`). */
  prompt?: string;
  /** Sampling temperature; 0 is greedy. Models that do not sample ignore it. */
  temperature?: number;
}

/** A word and when it was said, in seconds from the start of the samples. */
export interface TranscribedWord {
  word: string;
  start: number;
  end: number;
}

/** A stretch of a window's text with its times, in seconds from the start of the samples. */
export interface TranscribedSegment {
  start: number;
  end: number;
  text: string;
  /** The token ids of its text. */
  tokens: number[];
}

export interface TranscribeResult {
  /** The text of the window. */
  text: string;
  /** Its words with their times (empty when the model cannot time them). */
  words: TranscribedWord[];
  /**
   * The window's text in timed segments, where the model times its text in stretches (Whisper's
   * timestamp tokens). Absent or empty: the window's text is one segment, from its first word
   * to its last (or the whole window when there are no words).
   */
  segments?: TranscribedSegment[];
  /** The token ids of the text. */
  tokens: number[];
  /** The mean log probability of the tokens chosen. */
  avgLogprob: number;
  /** The share (0 to 1) of the window the model heard no speech in. */
  noSpeechProb: number;
  /** The language the model transcribed (ISO-639-1), when it knows. */
  language?: string;
}

/** How a text-to-speech model speaks ({@link LoadedModel.speech}). */
export interface SpeechOutput {
  /** Its voices by name, at least one; the first is the default. */
  readonly voices: readonly string[];
}

/** What {@link LoadedModel.synthesize} is asked: one sentence (or part of a long one) of the input. */
export interface SynthesizeParams {
  /** The text, trimmed, never empty. */
  text: string;
  /** One of {@link SpeechOutput.voices}. */
  voice: string;
  /** How to speak (tone, pace, accent), when the client says; a model that cannot follow them ignores them. */
  instructions?: string;
}

/** What {@link LoadedModel.synthesize} answers: the part spoken. */
export interface SynthesizeResult {
  /** Mono samples in [-1, 1]. */
  samples: Float32Array;
  /** Their rate, in Hz; the same for every part a model speaks. */
  sampleRate: number;
  /** Tokens of the text the model read. */
  tokens: number;
}

/** What {@link LoadedModel.tokenize} is asked (llama-server's `/tokenize` fields). */
export interface TokenizeParams {
  content: string;
  /** Add the tokens the model puts around a text (BOS, and EOS or SEP where it adds them). */
  addSpecial: boolean;
  /** Read special-token text in `content` (`<|im_start|>`, `[SEP]`) as those tokens, not as plain text. */
  parseSpecial: boolean;
  /** Return each token's text as well. */
  withPieces: boolean;
}

export interface TokenizeResult {
  tokens: number[];
  /** With `withPieces`: each token's text, in token order. */
  pieces?: string[];
}

/** The KV cache element types LIA offers (the three Ollama does). */
export type KvCacheType = 'f16' | 'q8_0' | 'q4_0';

export interface LoadOptions {
  /** Context length per sequence (tokens); the backend may clamp it to the model's. */
  contextLength?: number;
  /** The KV cache's element type, keys and values alike. Defaults to `f16`. */
  kvCacheType?: KvCacheType;
  /**
   * Flash attention; undefined: the engine decides (llama.cpp's `auto`). A quantized cache needs it:
   * with `false` the engine plans and loads an `f16` cache instead, as Ollama does.
   */
  flashAttention?: boolean;
  /** Concurrent sequences (slots) to provision. */
  parallel: number;
  /** CPU threads for this model (see docs/engine.md for the default). */
  threads: number;
  /**
   * CPU threads for large batches (prompts, many streams), where the backend tells batches apart
   * (llama.cpp's `n_threads_batch`). Defaults to `threads`.
   */
  batchThreads?: number;
  /** Fired when the model dies on its own (runner crash); the scheduler forgets it. */
  onExit?: (error: Error) => void;
  /** Prompt-evaluation batch size in tokens. Defaults to the backend's own (512 for llama.cpp). */
  batchSize?: number;
  /**
   * LoRA adapters to load with the model, each at the scale a request gets when it names none
   * (see {@link InferenceBackend.adapters}). Absent: none.
   */
  adapters?: readonly AdapterScale[];
  /** Speculative decoding for the model's answers, as the request plan decided it (plan/speculation.ts). Absent: none. */
  speculation?: Speculation;
  /**
   * Where the model runs, as the engine's offload plan decided: a device of the backend's
   * `devices()` (null: the CPU) and how many layers go there, the output layer counted as one
   * more; `vramBytes` is what they are expected to hold there. Absent: the backend decides.
   */
  offload?: Offload;
}

/**
 * Speculative decoding of a load: a draft model, or n-gram lookup, proposes up to `maxDraft` tokens
 * per step, which the model checks in one batch; accepted tokens are those it would have sampled
 * itself, so the answer is the same as without (greedy: token for token).
 */
export type Speculation =
  | {
      kind: 'draft';
      /** The stored draft model (its name and weights; same vocabulary as the model, checked by the plan). */
      draft: { name: string; path: string; sizeBytes: number };
      maxDraft: number;
    }
  | {
      kind: 'ngram';
      /** The length of the n-gram looked up in the prompt and the answer so far. */
      ngram: number;
      maxDraft: number;
    };

/** What a GPU offload of a model moves (a format handler's {@link FormatHandler.offloadCosts}). */
export interface LayerCosts {
  /** Repeating layers (`block_count`). */
  layers: number;
  /** Bytes one layer takes on a device: its weights and its KV cache for the load's context and slots. */
  bytesPerLayer: number;
  /** Bytes of the output layer (and what goes with it) when it is offloaded too. */
  outputBytes: number;
  /** Bytes a device holds for any offload at all (compute buffers). */
  fixedBytes: number;
}

/** Where a model runs, as the engine's offload plan decides it (see {@link LoadOptions.offload}). */
export interface Offload {
  /** The device (one of the backend's `devices()`), or null for the CPU. */
  device: string | null;
  /** Layers on the device, the output layer counted as one (`layers + 1` is the whole model). */
  gpuLayers: number;
  /** Bytes the model is expected to hold on the device (on all of them, when split). */
  vramBytes: number;
  /**
   * A model spread over several GPUs: each device with its layers and bytes, in order (the first
   * is {@link device}, the output layer on the last); absent on one device. The layers add up to
   * {@link gpuLayers}.
   */
  split?: readonly DeviceShare[];
}

/** One device's part of a split offload ({@link Offload.split}). */
export interface DeviceShare {
  /** The device (one of the backend's `devices()`). */
  device: string;
  /** Layers on this device, the output layer counted as one where it is here. */
  gpuLayers: number;
  /** Bytes this part is expected to hold on the device. */
  vramBytes: number;
}

export interface LoadedModel {
  readonly capabilities: readonly ModelCapability[];
  /** Context length per sequence, as loaded. */
  readonly contextLength: number;
  /** Bytes of memory held (RAM + VRAM) and of that VRAM. */
  readonly sizeBytes: number;
  readonly vramBytes: number;
  /**
   * Concurrent requests this model takes (its slots); more wait in the engine's queue. Defaults to
   * the engine's `numParallel`. A remote model (one that forwards to upstream engines) sets what
   * its upstreams take together.
   */
  readonly slots?: number;
  /**
   * The LoRA adapters it was loaded with, and whether a request may run with other scales
   * (`params.adapters`); without `perRequest` the loaded scales are the only ones. Absent: none.
   */
  readonly adapters?: { readonly loaded: readonly AdapterScale[]; readonly perRequest: boolean };
  /** The speculative decoding it was loaded with (its load options'); absent: none. */
  readonly speculation?: Speculation;
  generate(params: GenerateParams, signal: AbortSignal): AsyncIterable<GenerationEvent>;
  chat(params: ChatParams, signal: AbortSignal): AsyncIterable<GenerationEvent>;
  embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult>;
  /**
   * The length in tokens (BOS included) of the prompt `chat` would evaluate for `params`: the
   * messages and tools in the model's chat template, counted by its tokenizer, nothing generated
   * and nothing cut to fit the context. Optional: a backend without it has its prompt measured by
   * a one-token chat.
   */
  countChatTokens?(params: ChatParams, signal: AbortSignal): Promise<number>;
  /**
   * Scores documents against a query (a reranker: a cross-encoder with a relevance head).
   * Optional: only models with the `rerank` capability have it; the engine answers 400 for others.
   */
  rank?(params: RankParams, signal: AbortSignal): Promise<RankResult>;
  /**
   * How a speech model takes audio. Present exactly on models with the `transcription`
   * capability, with {@link transcribe}.
   */
  readonly audio?: AudioInput;
  /**
   * Text from one window of audio (decoded, resampled and cut by the engine). Optional: only
   * models with the `transcription` capability have it; the engine answers 400 for others.
   */
  transcribe?(params: TranscribeParams, signal: AbortSignal): Promise<TranscribeResult>;
  /**
   * How a text-to-speech model speaks. Present exactly on models with the `speech` capability,
   * with {@link synthesize}.
   */
  readonly speech?: SpeechOutput;
  /**
   * Speech from one sentence of text (the engine splits the input, synthesises the parts in
   * order and encodes them). Optional: only models with the `speech` capability have it; the
   * engine answers 400 for others.
   */
  synthesize?(params: SynthesizeParams, signal: AbortSignal): Promise<SynthesizeResult>;
  /** The model's tokenizer on a text. Optional: a model without it (a remote one) cannot tokenize (400). */
  tokenize?(params: TokenizeParams, signal: AbortSignal): Promise<TokenizeResult>;
  /**
   * Token ids back to text, special tokens written out. An id outside the vocabulary is a 400.
   * Optional, with {@link tokenize}.
   */
  detokenize?(tokens: number[], signal: AbortSignal): Promise<string>;
  /** Frees everything; safe to call twice. */
  unload(): Promise<void>;
}

export interface MemoryEstimate {
  /** Bytes the model will hold once loaded with the given options (weights + caches). */
  totalBytes: number;
  vramBytes: number;
  /**
   * Of `totalBytes`, what the engine's process costs whatever it holds (its code, threads and
   * buffers). A draft model loads into the model's own process, so the engine counts this once
   * for the pair. Absent: 0.
   */
  processBytes?: number;
}

/** One stored file (a manifest layer) of a model, as a {@link FormatHandler} sees it. */
export interface ModelFile {
  /** The layer's media type, e.g. `application/vnd.ollama.image.model`. */
  mediaType: string;
  /** The file's relative name (the OCI `org.opencontainers.image.title` annotation), when it has one. */
  name?: string;
  /** `sha256:<hex>` of the bytes. */
  digest: string;
  size: number;
  /** The blob file on disk. Read it; never write or move it. */
  path: string;
}

/** What a handler is asked to describe. */
export interface DescribeInput {
  /** The layers that carry this format's weights (their media type is one of the handler's). */
  weights: ModelFile[];
  /** Every layer of the model, weights included (e.g. a GGUF vision projector). */
  layers: ModelFile[];
  /** The text of the model's template layer, if it has one (Ollama Go-template text). */
  template?: string;
  /** `/api/show` with `verbose`: the full metadata is wanted. Such answers are not cached. */
  verbose: boolean;
}

/** What a handler makes of a model: the `details` of `/api/tags` and `/api/show`, and more. */
export interface FormatDescription {
  /** The store adds `format` (the handler's name) and `parent_model`. */
  details: Pick<ModelDetails, 'family' | 'families' | 'parameter_size' | 'quantization_level'>;
  /** What the model can do (`/api/show` → `capabilities`); the engine refuses generation to a model without `completion` that has `embedding`. */
  capabilities: ModelCapability[];
  /** The `model_info` of `/api/show`. Defaults to `{}`. */
  modelInfo?: Record<string, unknown>;
  /** A speech model's voices (`/api/show` → `voices`), the default first. Absent for other models. */
  voices?: string[];
}

/** A handler's verdict on the file names of an `/api/create`: not its format, or its format (usable or not). */
export type FileRecognition = null | { problem?: string };

/**
 * A model format as the backend that runs it knows it. The model store uses it to recognise the
 * files given to `/api/create`, to tell which stored layers carry the weights, to describe a
 * model, and to hand the weights to the backend in the shape it loads.
 */
export interface FormatHandler {
  /** The format's name, e.g. `gguf`: lower-case letters, digits, `-` and `_`, at most 32 characters. */
  readonly name: ModelFormat;
  /**
   * Media types of the manifest layers that carry the weights (OCI/Ollama), unique to this format.
   * The first is the one `/api/create` writes.
   */
  readonly mediaTypes: readonly string[];
  /**
   * How the weights reach the backend (`ResolvedModel.modelPath`): `file`, the one weights blob
   * (`/api/create` takes exactly one file and keeps no name); `folder`, a directory the store lays
   * out with every weights file under its relative name (kept in the layer's title annotation).
   */
  readonly layout: 'file' | 'folder';
  /** What `/api/create` wants as `files` for this format, for error messages, e.g. `one .gguf file`. */
  readonly files: string;
  /**
   * Looks at the relative file names given to `/api/create`: `null` when they are not this
   * format, `{}` when they are, `{ problem }` when they are meant as this format but cannot make
   * a model (a 400 with that text).
   */
  recognise(names: readonly string[]): FileRecognition;
  /**
   * A vision projector that may travel beside the weights (a `file`-layout format only): the
   * media type of its layer (Ollama's `application/vnd.ollama.image.projector`) and whether a file
   * given to `/api/create` is one (a CLIP GGUF). The store keeps such a file as that layer and
   * hands it to the backend as `ResolvedModel.projectorPath`. Optional.
   */
  readonly projector?: { readonly mediaType: string; is(file: ModelFile): Promise<boolean> };
  /**
   * LoRA adapters a model of this format may carry (a `file`-layout format only): the media type
   * of their layers (Ollama's `application/vnd.ollama.image.adapter`) and a check of one adapter
   * against the weights it is for, run by `/api/create` before anything is written: null when it
   * fits, else the problem (a 400 with that text, naming both architectures where they differ).
   * The store hands the adapters to the backend as `ResolvedModel.adapters`. Optional: without it
   * the format's models take no adapters.
   */
  readonly adapter?: { readonly mediaType: string; check(adapter: ModelFile, weights: ModelFile): Promise<string | null> };
  /**
   * Reads what a model is from its files. Throws an `AppError` (a 400) when the weights are not
   * this format; `/api/create` calls it on the new files before it writes anything.
   */
  describe(input: DescribeInput): Promise<FormatDescription>;
  /**
   * Bytes a model of this format holds once loaded with `options`, whichever engine of the
   * format loads it: its weights (and projector), the cache of `options.parallel` sequences of
   * `options.contextLength` tokens, the buffers one batch needs. Not the engine's own process,
   * which each backend adds in its {@link InferenceBackend.estimateMemory}. A backend that runs
   * another's format (`runs`) budgets with this instead of a guess. Optional.
   */
  footprint?(model: ResolvedModel, options: LoadOptions): Promise<number>;
  /**
   * What a GPU offload of a model of this format moves, loaded with `options`: its repeating
   * layers (each with its share of the cache), the output layer, the buffers a device holds for
   * any offload. The engine's offload plan divides the model by it. Optional: without it the
   * format's models run where their engine puts them.
   */
  offloadCosts?(model: ResolvedModel, options: LoadOptions): Promise<LayerCosts>;
  /**
   * Whether a model of this format can keep its KV cache in `type` (a GGUF's heads must be a
   * multiple of the quantized type's block). The engine loads an `f16` cache instead of one it
   * cannot hold. Optional: without it every type is tried.
   */
  kvCacheFits?(model: ResolvedModel, type: KvCacheType): Promise<boolean>;
  /**
   * Whether `draft` can draft for `weights` in speculative decoding: null when their vocabularies
   * are the same (as their engines compare them), else the difference, for a 400 naming both
   * models. Run by `/api/create` for a Modelfile's `DRAFT` and by the engine's request plan before
   * a load with a draft. Optional: without it the format's models take no draft model.
   */
  draftFits?(weights: ModelFile, draft: ModelFile): Promise<string | null>;
  /**
   * The chat template the weights carry (a GGUF's `tokenizer.chat_template`), or null when they
   * carry none: then the store's template layer ({@link ResolvedModel.template}) says how the
   * model is prompted. A backend that runs another's format (`runs`) asks it to prompt the model
   * as the format's own backend does. Optional: a backend without it keeps its engine's default.
   */
  chatTemplate?(model: ResolvedModel): Promise<string | null>;
}

export interface InferenceBackend {
  /** Unique name, e.g. `llama-cpp`. */
  readonly name: string;
  /**
   * The model formats this backend runs (a model's `format` picks the backend). Two enabled
   * backends may claim one format only when the configuration's `backends` key picks one.
   */
  readonly formats: readonly FormatHandler[];
  /**
   * Formats this backend also runs with the handler another backend declares (it recognises and
   * describes no files itself): it serves them where the configuration's `backends` chooses it
   * (per format or per model), or for a model that needs a capability only it declares (see
   * {@link capabilities}). Claiming a format this way never conflicts with its own backend.
   * Defaults to none.
   */
  readonly runs?: readonly ModelFormat[];
  /**
   * Capabilities that need a backend's support beyond running the weights, which this backend
   * serves: today `vision` (a model with a projector takes images). A model with such a
   * capability goes to a backend that declares it (see `BackendRegistry.forModel`). Defaults to
   * none.
   */
  readonly capabilities?: readonly ModelCapability[];
  /**
   * Capabilities of the weights that this backend serves better than its formats' own backend
   * (backend-llama-server: `rerank`, scoring a request's documents in one batch where
   * node-llama-cpp scores one pair at a time). A model with one of them runs here instead of on
   * its format's backend while {@link available} says so, unless the configuration's `backends`
   * names a backend for the model or its format. Defaults to none.
   */
  readonly prefers?: readonly ModelCapability[];
  /**
   * Whether this backend can load models on this machine now (what it starts is installed: a
   * binary that is built). Asked only before a model goes here by preference ({@link prefers}), at
   * each load; a model that must run here (a `backends` choice, a capability only this backend
   * declares) is loaded regardless, and the load's error says what is missing. A rejection counts
   * as false. Defaults to always available.
   */
  available?(): Promise<boolean>;
  /**
   * How this backend applies a model's LoRA adapters: `load`, with the model (a model with other
   * adapters is another load), or `request`, per request on one loaded base (every adapter of the
   * stored models that share the weights is loaded with it, off until a request names it).
   * Absent: it takes no adapters, and a model with adapters is not loaded here (a 400).
   */
  readonly adapters?: 'load' | 'request';
  /**
   * Speculative decoding this backend carries out: which kinds ({@link Speculation}) and the most
   * tokens it drafts per step. The request plan refuses (a 400) what it cannot do. Absent: none.
   */
  readonly speculation?: { readonly kinds: readonly Speculation['kind'][]; readonly maxDraft: number; readonly why?: string };
  /**
   * The GPUs this backend can place a model's layers on now, with what each has free (the engine
   * plans the offload from it and passes the decision in {@link LoadOptions.offload}). Optional:
   * a backend without it is given no offload and decides by itself.
   */
  devices?(): Promise<{ id: string; name: string; totalBytes: number; freeBytes: number }[]>;
  estimateMemory(model: ResolvedModel, options: LoadOptions): Promise<MemoryEstimate>;
  load(model: ResolvedModel, options: LoadOptions): Promise<LoadedModel>;
  /** Releases process-wide resources at shutdown. */
  close?(): Promise<void>;
}
