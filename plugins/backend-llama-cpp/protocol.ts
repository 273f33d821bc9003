/**
 * The IPC protocol between the llama.cpp backend (parent) and one runner child process. Messages
 * are plain objects sent over Node's IPC channel; every request carries an `id` the answers echo.
 * The runner owns exactly one model, so the protocol has no model names.
 *
 * @module
 */
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent, RankParams, RankResult, TokenizeParams, TokenizeResult } from 'lia/engine';
import type { ModelCapability } from 'lia/model-store';

/** What the parent asks the runner to load. */
export interface LoadSpec {
  modelPath: string;
  /** Context length per sequence; 0 means the model's trained context. */
  contextLength: number;
  parallel: number;
  /** CPU threads of small batches (generation steps of a few streams). */
  threads: number;
  /** CPU threads of large batches (see runner/batch-threads.ts); defaults to `threads`. */
  batchThreads?: number;
  batchSize: number;
  /** `auto` (CUDA, then Vulkan, then CPU) or `false` for the CPU. */
  gpu: 'auto' | false;
  /**
   * Layers to put on the GPU, the output layer counted as one more (llama.cpp's `n_gpu_layers`),
   * as the engine's offload plan decided; absent: node-llama-cpp fits them itself (no plan).
   */
  gpuLayers?: number;
  /** The KV cache's element type, keys and values; absent: f16. */
  kvCacheType?: 'f16' | 'q8_0' | 'q4_0';
  /** Flash attention; absent: `auto`. */
  flashAttention?: boolean;
  /** LoRA adapters applied to the context, with their scales; absent: none. */
  adapters?: readonly { path: string; scale: number }[];
  /**
   * Speculative decoding for every sequence: a draft model's file (loaded beside the model, one
   * draft sequence per sequence) or n-gram lookup, drafting up to `maxDraft` tokens per step.
   */
  speculation?: { draftPath: string; maxDraft: number } | { ngram: number; maxDraft: number };
  /** The store's template layer (Ollama Go-template text), if any. */
  template?: string;
  /**
   * `JinjaTemplate` when an earlier load of the same model file found that no specialised chat
   * wrapper renders its GGUF template (the costly outcome: every candidate is tried). The runner
   * then uses the template as it is without trying them again.
   */
  knownChatWrapper?: 'JinjaTemplate';
}

/** Facts the runner reports once the model is ready. */
export interface RunnerInfo {
  contextLength: number;
  sizeBytes: number;
  vramBytes: number;
  capabilities: ModelCapability[];
  /** The chat wrapper in use (`ChatML`, `JinjaTemplate`, ...), for the log. */
  chatWrapper: string;
  gpu: string | false;
  /** Milliseconds the load took in the runner: the weights, the context, the chat template. */
  loadMs: { model: number; context: number; template: number };
}

export type ParentMessage =
  /** Sent right after the fork: import the bindings and pick the binary now, before a model is asked for. */
  | { t: 'prepare'; gpu: 'auto' | false }
  /** The GPU the bindings use, with its memory now (answered by a `devices` message). */
  | { t: 'devices' }
  | { t: 'load'; spec: LoadSpec }
  | { t: 'generate'; id: number; params: GenerateParams }
  | { t: 'chat'; id: number; params: ChatParams }
  | { t: 'embed'; id: number; params: EmbedParams }
  /** The prompt length of a chat (answered by a `result` whose value is the token count). */
  | { t: 'count'; id: number; params: ChatParams }
  /** Relevance scores (answered by a `result` whose value is a {@link RankResult}). */
  | { t: 'rank'; id: number; params: RankParams }
  /** `/tokenize` (a `result` with a {@link TokenizeResult}) and `/detokenize` (a `result` with the text). */
  | { t: 'tokenize'; id: number; params: TokenizeParams }
  | { t: 'detokenize'; id: number; tokens: number[] }
  | { t: 'abort'; id: number }
  /** The thread count of large batches from now on (runner/batch-threads.ts). */
  | { t: 'threads'; batch: number }
  | { t: 'unload' };

/**
 * How the parent should classify an error: the client's fault (400), a prompt longer than the
 * context (400, `LIA_ERR_CONTEXT_LENGTH_EXCEEDED`), or the engine's (500).
 */
export type RunnerErrorKind = 'bad_request' | 'context_length' | 'engine';

/** What a one-answer request's `result` carries. */
export type RunnerResult = EmbedResult | number | RankResult | TokenizeResult | string;

/**
 * The GPU node-llama-cpp's bindings run on, as one device: node-llama-cpp spreads a model over
 * every GPU of its back end by itself and reports their memory together.
 */
export interface RunnerDevice {
  /** The back end (`cuda`, `vulkan`, `metal`). */
  id: string;
  /** The GPUs' names, comma-separated. */
  name: string;
  totalBytes: number;
  freeBytes: number;
}

export type RunnerMessage =
  | { t: 'ready'; info: RunnerInfo }
  | { t: 'devices'; devices: RunnerDevice[] }
  | { t: 'load_error'; message: string }
  | { t: 'event'; id: number; event: GenerationEvent }
  | { t: 'result'; id: number; result: RunnerResult }
  | { t: 'error'; id: number; kind: RunnerErrorKind; message: string }
  | { t: 'log'; level: 'debug' | 'info' | 'warn' | 'error'; message: string }
  /** Several messages sent together (the tokens of one decode step, for every stream of it). */
  | { t: 'batch'; messages: RunnerMessage[] };
