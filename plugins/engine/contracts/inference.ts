/**
 * The native inference service: the one inference path. The engine plugin (`plugins/engine`)
 * provides it; the Ollama routes (`/api/generate`, `/api/chat`, `/api/embed`) call it directly and
 * the OpenAI routes (`/v1/...`) translate their requests into these shapes and its events back
 * into OpenAI chunks. Nobody else talks to a backend.
 *
 * @module
 */
import type { ChatMessage, GenerationEvent, OutputFormat, SamplingOptions, ToolChoice, ToolDefinition } from './backend.js';

/** `keep_alive` as clients send it: seconds, a Go duration string (`5m`, `1h30m`) or negative. */
export type KeepAlive = number | string;

/**
 * Ollama's `think`: `true` or a level asks a thinking model for its reasoning apart from the answer
 * (a model without the `thinking` capability: 400); `false` or unset leaves the output whole.
 * `'auto'` (the OpenAI translator's default) splits where the model has the capability and never
 * refuses. Levels are accepted as `true`: the prompt does not carry them.
 */
export type Think = boolean | 'low' | 'medium' | 'high' | 'max' | 'auto';

export interface InferenceGenerateRequest {
  model: string;
  prompt: string;
  system?: string;
  template?: string;
  suffix?: string;
  raw?: boolean;
  format?: OutputFormat;
  options?: SamplingOptions;
  keep_alive?: KeepAlive;
  /** Ollama's `context`: token ids of an earlier answer's exchange, evaluated before the prompt. */
  context?: number[];
  /** Images for the prompt, base64; the model needs the `vision` capability (else a 400). */
  images?: string[];
  /** Audio clips for the prompt, base64, in any container the engine decodes; the model needs the `audio` capability (else a 400). */
  audio?: string[];
  think?: Think;
  /** Log probabilities with this many alternatives per token (0 to 20); unset: none (see `GenerateParams.logprobs`). */
  logprobs?: number;
  /** False when the client waits for the whole answer (see {@link InferenceChatRequest.stream}). Defaults to true. */
  stream?: boolean;
}

export interface InferenceChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  /**
   * Forces a tool call (see {@link ToolChoice}). Defaults to `'auto'`. Set by the OpenAI
   * translator only; the Ollama `/api/chat` route has no such field.
   */
  toolChoice?: ToolChoice;
  format?: OutputFormat;
  options?: SamplingOptions;
  keep_alive?: KeepAlive;
  think?: Think;
  /** Log probabilities with this many alternatives per token (0 to 20); unset: none (see `GenerateParams.logprobs`). */
  logprobs?: number;
  /**
   * False when the client waits for the whole answer (a non-streaming request): the backend is
   * told (`whole`), so one that forwards to replicas may start a failed answer again elsewhere.
   * Defaults to true (streamed).
   */
  stream?: boolean;
}

export interface InferenceEmbedRequest {
  model: string;
  input: string[];
  /** Cut inputs longer than the context (true) or fail with a 400 (false). Defaults to true. */
  truncate?: boolean;
  dimensions?: number;
  /** L2-normalise the vectors; the legacy `/api/embeddings` sends false. Defaults to true. */
  normalize?: boolean;
  options?: SamplingOptions;
  keep_alive?: KeepAlive;
}

export interface InferenceRerankRequest {
  model: string;
  query: string;
  documents: string[];
  /** Cut a query and document pair longer than the context (true) or fail with a 400 (false). Defaults to true. */
  truncate?: boolean;
  keep_alive?: KeepAlive;
}

export interface RerankResponse {
  model: string;
  /** One relevance score (0 to 1) per document, in document order. */
  scores: number[];
  promptTokens: number;
}

export interface InferenceTranscribeRequest {
  model: string;
  /** The file as uploaded, in any container and codec the engine's decoder reads (ffmpeg: docs/audio.md). */
  audio: Uint8Array;
  /** `translate` asks for English text (`/v1/audio/translations`). Defaults to `transcribe`. */
  task?: 'transcribe' | 'translate';
  /** The language spoken (ISO-639-1), a hint. */
  language?: string;
  /** Text to continue from (a previous part's transcript, spellings). */
  prompt?: string;
  temperature?: number;
  keep_alive?: KeepAlive;
}

/** One stretch of a transcript with its times, in seconds from the start of the file. */
export interface TranscriptSegment {
  /** 0, 1, ... in order. */
  id: number;
  start: number;
  end: number;
  text: string;
  tokens: number[];
  avgLogprob: number;
  noSpeechProb: number;
  /** The window's start, in samples at {@link TranscriptionResponse.sampleRate} (Whisper's `seek`). */
  seek: number;
}

export interface TranscriptionResponse {
  model: string;
  task: 'transcribe' | 'translate';
  /** The language of the text (ISO-639-1): `en` for a translation; else the request's, else what the model detected, else `en`. */
  language: string;
  /** Seconds of audio in the file. */
  duration: number;
  sampleRate: number;
  text: string;
  segments: TranscriptSegment[];
  /** Every word with its times, in seconds from the start of the file. */
  words: { word: string; start: number; end: number }[];
}

/** The encodings speech is answered in (OpenAI's `response_format` names); `pcm` is raw signed 16-bit little-endian samples. */
export type SpeechFormat = 'mp3' | 'opus' | 'aac' | 'flac' | 'wav' | 'pcm';

export interface InferenceSpeakRequest {
  model: string;
  /** The text to speak; the engine splits it into sentences and speaks them in order. */
  input: string;
  /**
   * One of the model's voices (`/api/show` → `voices`), or one of OpenAI's voice names, which
   * map to the model's voices in turn (docs/audio.md). Defaults to the model's first voice.
   */
  voice?: string;
  /** How to speak; handed to the model, which may ignore it. */
  instructions?: string;
  /** 0.25 to 4 (ffmpeg's `atempo`, pitch kept). Defaults to 1. */
  speed?: number;
  /** Defaults to `mp3`. */
  format?: SpeechFormat;
  keep_alive?: KeepAlive;
}

/** What a spoken answer cost. */
export interface SpeechUsage {
  /** The tokens the model read. */
  inputTokens: number;
  /** The audio produced, counted as 20 tokens a second. */
  outputTokens: number;
  /** Seconds of audio produced, before any change of speed. */
  seconds: number;
}

/**
 * A spoken answer under way. The promise that returns it settles once the first encoded bytes
 * are in hand (the model loaded, the voice found, the first sentence spoken, the encoder
 * running), so every failure before any audio rejects it with its own status. `audio` yields the
 * encoded bytes as the encoder writes them and throws on a failure after that; leaving it early
 * (or the request's signal) stops the synthesis and the encoder.
 */
export interface SpeechStream {
  /** The model name as resolved by the store. */
  model: string;
  /** The model's voice that speaks. */
  voice: string;
  /** The encoding asked for. */
  format: SpeechFormat;
  /** The media type of the encoded audio (`audio/mpeg`, ...). */
  contentType: string;
  /** The rate of the encoded audio, in Hz (24000, as OpenAI's). */
  sampleRate: number;
  /** The encoded audio, in the pieces ffmpeg writes; the first is already in hand. */
  audio: AsyncIterable<Uint8Array>;
  /** Usage so far; final once `audio` has ended. */
  usage(): SpeechUsage;
}

export interface InferenceTokenizeRequest {
  model: string;
  content: string;
  /** Defaults to false (llama-server's default). */
  add_special?: boolean;
  /** Defaults to true (llama-server's default). */
  parse_special?: boolean;
  /** Defaults to false. */
  with_pieces?: boolean;
  keep_alive?: KeepAlive;
}

export interface TokenizeResponse {
  model: string;
  tokens: number[];
  /** With `with_pieces`: each token's text. */
  pieces?: string[];
}

export interface InferenceDetokenizeRequest {
  model: string;
  tokens: number[];
  keep_alive?: KeepAlive;
}

/**
 * A running generation. The promise that returns it settles only once the engine has produced its
 * first event (the model loaded, a slot held, the prompt read), so every failure before any output
 * (unknown model, queue full, a prompt the context cannot hold, an engine that died) rejects it
 * with its own status, and a route may write the response head as soon as it has the stream.
 * `events` ends with one `done` event, or throws (the route writes an error frame).
 */
export interface GenerationStream {
  /** The model name as resolved by the store (what responses echo in `model`). */
  model: string;
  /** Nanoseconds spent loading the model for this request (0 when it was loaded). */
  loadNs: number;
  events: AsyncIterable<GenerationEvent>;
}

export interface EmbedResponse {
  model: string;
  embeddings: number[][];
  promptTokens: number;
  loadNs: number;
  totalNs: number;
}

/** A loaded model as `/api/ps` lists it. */
export interface LoadedModelInfo {
  name: string;
  model: string;
  digest: string;
  size: number;
  size_vram: number;
  expires_at: string;
  /** Context length per slot (sequence), as loaded: each of its `parallel` requests has this many tokens. */
  context_length: number;
  /** The backend (engine) that serves it: `llama-server`, `llama-cpp`, … */
  engine: string;
  /** Where it runs: `cpu`, the device the offload plan chose (`Vulkan0`, `CUDA1`), or `gpu` where the backend placed layers by itself. */
  device: string;
  /** Its slots (requests served at once: `num_parallel`, else the engine's), how many run now, and how many wait for one. */
  parallel: number;
  running: number;
  queued: number;
  /** The KV cache's element type it was loaded with (`f16`, `q8_0`, `q4_0`). */
  kv_cache_type: string;
  /** Flash attention as loaded: `on`, `off`, or `auto` (the engine decided). */
  flash_attention: 'on' | 'off' | 'auto';
  /**
   * Speculative decoding as loaded, in the options' spellings: the draft model's name or the
   * n-gram length, and the most tokens drafted per step. Absent without speculation.
   */
  draft_model?: string;
  draft_ngram?: number;
  draft_num_predict?: number;
}

export interface InferenceService {
  generate(request: InferenceGenerateRequest, signal: AbortSignal): Promise<GenerationStream>;
  chat(request: InferenceChatRequest, signal: AbortSignal): Promise<GenerationStream>;
  embed(request: InferenceEmbedRequest, signal: AbortSignal): Promise<EmbedResponse>;
  /**
   * The prompt length in tokens of a chat request, as the model's template and tokenizer make it
   * (stored system prompt and messages included, nothing cut to fit the context, nothing
   * generated); loads the model if needed. Anthropic's `count_tokens` uses it. Optional for
   * other implementations of this service.
   */
  countChatTokens?(request: InferenceChatRequest, signal: AbortSignal): Promise<{ model: string; promptTokens: number }>;
  /**
   * Relevance scores of documents for a query, from a model with the `rerank` capability (else a
   * 400 naming it). Optional for other implementations of this service.
   */
  rerank?(request: InferenceRerankRequest, signal: AbortSignal): Promise<RerankResponse>;
  /**
   * Text from an audio file, on a model with the `transcription` capability (else a 400 naming
   * it). The engine decodes and resamples the file, cuts it into the model's windows and calls
   * `onSegment` with each window's segment as it is done (for streaming), before it resolves.
   * An empty, truncated or undecodable file is a 400. Optional for other implementations.
   */
  transcribe?(request: InferenceTranscribeRequest, signal: AbortSignal, onSegment?: (segment: TranscriptSegment) => void): Promise<TranscriptionResponse>;
  /**
   * Speech from text, on a model with the `speech` capability (else a 400 naming it): the input
   * is split into sentences, each spoken in turn and encoded as it is done (ffmpeg), so the
   * audio starts with the first sentence. An empty input, an unknown voice, a speed out of range
   * is a 400. Optional for other implementations.
   */
  speak?(request: InferenceSpeakRequest, signal: AbortSignal): Promise<SpeechStream>;
  /** The model's tokenizer on a text (loads the model if needed). Optional. */
  tokenize?(request: InferenceTokenizeRequest, signal: AbortSignal): Promise<TokenizeResponse>;
  /** Token ids back to text. Optional, with {@link tokenize}. */
  detokenize?(request: InferenceDetokenizeRequest, signal: AbortSignal): Promise<{ model: string; content: string }>;
  /** Loads a model without generating (empty prompt); resolves when it is ready. */
  load(model: string, keepAlive?: KeepAlive): Promise<{ model: string; loadNs: number }>;
  /** Unloads a model now (keep_alive 0, `lia stop`); a no-op when it is not loaded. */
  unload(model: string): Promise<void>;
  /** Unloads everything (svc-inference stop, shutdown). */
  unloadAll(): Promise<void>;
  ps(): LoadedModelInfo[];
  /** Every model the engine holds or is loading, with its queue and slots (for metrics). Optional. */
  activity?(): ModelActivity[];
}

/** A model the engine knows of right now: loaded, loading or waited for. */
export interface ModelActivity {
  model: string;
  /** Requests waiting for a slot or for the load. */
  queued: number;
  /** Requests holding a slot. */
  active: number;
  /** Its slots (requests served at once): what it is loaded with, or will be once loaded. Absent from older implementations of this service. */
  slots?: number;
  loaded: boolean;
  /** Bytes in memory (0 while loading) and of those on the GPU. */
  sizeBytes: number;
  vramBytes: number;
  /** The backend serving it, and where it runs (a device of the offload plan, `cpu` or `gpu`); empty while loading. */
  engine: string;
  device: string;
}
