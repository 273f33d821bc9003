/**
 * What every loaded ONNX model shares, whatever its head (a sentence encoder, a cross-encoder):
 * the {@link LoadedModel} members it answers the same way (no generation, tokenising with its
 * tokenizer, its context and size), forward passes run one at a time, and an `unload` that waits
 * for the pass in flight. model.ts and cross-encoder.ts add what their network computes.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { EmbedParams, EmbedResult, GenerationEvent, TokenizeParams, TokenizeResult } from 'lia/engine';
import type { ModelCapability } from 'lia/model-store';
import type { OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import { detokenizeIds, tokenizeText, type Tokenizer } from './tokens.js';

/** Keeps the folder's path out of messages that reach clients: the first line, 300 characters. */
export function describeError(err: unknown, dir: string): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split(dir).join('<model>').split('\n')[0]!.slice(0, 300);
}

/**
 * The onnxruntime session options every model gets: `settings.threads` intra-op threads that do
 * not spin, one inter-op thread, sequential execution, full graph optimisation, and the CPU memory
 * arena as `settings.memoryArena` says.
 */
export function sessionOptions(settings: EncoderSettings) {
  return {
    intraOpNumThreads: settings.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    enableCpuMemArena: settings.memoryArena,
    // Spinning intra-op threads steal the cores the event loop and llama.cpp need, and were
    // slower even alone (bench/results/2026-11-27-code-notes.md).
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  } as const;
}

/** The options of a model folder's tokenizer, feature extractor and config: its own files, nothing fetched. */
export const FOLDER_ONLY = { local_files_only: true } as const;

/** The options of a model folder's network: its own files, on the CPU, in the folder's dtype, with {@link sessionOptions}. */
export function networkOptions(layout: OnnxLayout, settings: EncoderSettings) {
  return { ...FOLDER_ONLY, device: 'cpu', dtype: layout.dtype, session_options: sessionOptions(settings) } as const;
}

/** Runs `load` (the folder's `from_pretrained` calls and the model made of them); a failure is an engine failure naming the model, the folder's path kept out. */
export async function loadFolder<T>(model: { name: string }, layout: OnnxLayout, load: () => Promise<T>): Promise<T> {
  try {
    return await load();
  } catch (err) {
    throw Errors.engineFailed(`model "${model.name}" cannot be loaded: ${describeError(err, layout.dir)}`, { cause: err });
  }
}

export abstract class OnnxModel implements LoadedModel {
  abstract readonly capabilities: readonly ModelCapability[];
  readonly contextLength: number;
  readonly sizeBytes: number;
  readonly vramBytes = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #unloaded: Promise<void> | undefined;
  #disposed = false;

  constructor(
    protected readonly name: string,
    protected readonly layout: OnnxLayout,
    protected readonly tokenizer: Tokenizer,
    private readonly session: { dispose(): Promise<unknown> },
    protected readonly settings: EncoderSettings,
  ) {
    this.contextLength = layout.shape.maxTokens;
    this.sizeBytes = settings.sizeBytes;
  }

  generate(): AsyncIterable<GenerationEvent> {
    throw Errors.badRequest(`"${this.name}" does not support generate`);
  }

  chat(): AsyncIterable<GenerationEvent> {
    throw Errors.badRequest(`"${this.name}" does not support chat`);
  }

  embed(_params: EmbedParams, _signal: AbortSignal): Promise<EmbedResult> {
    return Promise.reject(Errors.badRequest(`"${this.name}" does not support embedding (the "embedding" capability in /api/show)`));
  }

  tokenize(params: TokenizeParams): Promise<TokenizeResult> {
    return Promise.resolve().then(() => tokenizeText(this.tokenizer, params));
  }

  detokenize(tokens: number[]): Promise<string> {
    return Promise.resolve().then(() => detokenizeIds(this.tokenizer, tokens));
  }

  unload(): Promise<void> {
    this.#unloaded ??= this.exclusive(async () => {
      this.#disposed = true;
      await this.session.dispose();
    });
    return this.#unloaded;
  }

  /** A 503 once `unload` has been called: the request must not start a pass. */
  protected checkLoaded(): void {
    if (this.#unloaded) throw Errors.unavailable(`model "${this.name}" is being unloaded`);
  }

  /** The padding side of the tokenizer. */
  protected paddingSide(): 'left' | 'right' {
    return this.tokenizer.padding_side === 'left' ? 'left' : 'right';
  }

  /** Runs `task` after every pass queued before it. */
  protected exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.#queue
      .catch(() => undefined)
      .then(() => {
        if (this.#disposed) throw Errors.unavailable(`model "${this.name}" was unloaded while the request ran`);
        return task();
      });
    this.#queue = run;
    return run;
  }
}
