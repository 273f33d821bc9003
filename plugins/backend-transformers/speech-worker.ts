/**
 * Speech models (CTC, Whisper, Moonshine, VITS) each run in a worker thread of their own
 * (speech-thread.ts): onnxruntime-node runs a graph on the thread that calls it, so a pass on
 * the main thread would stop the appliance from serving anything else (`/health` included, and
 * ffmpeg's output) until it ends. The {@link LoadedModel} here forwards `synthesize`,
 * `transcribe`, `tokenize` and `detokenize` to the thread and answers the rest itself.
 *
 * - An aborted request aborts its call in the thread (Whisper and Moonshine stop at the next token).
 * - `unload` waits for the pass in flight (the thread's model unloads as before), then ends the thread.
 * - A thread that dies (an uncaught error, out of memory, a kill) fails every call in flight and
 *   every later one with an engine error (500), and tells the scheduler (`LoadOptions.onExit`),
 *   which forgets the model: the next request loads it again.
 *
 * From source (`--import tsx`) the thread starts through a small `data:` module that registers
 * tsx's loader first (a worker does not take the parent's `--import` on Node 20); from `dist/` it
 * is the built `speech-thread.js` beside this file.
 *
 * @module
 */
import { Worker } from 'node:worker_threads';
import type { FastifyBaseLogger } from 'fastify';
import { AppError, Errors } from 'lia/plugin';
import type { AudioInput, EmbedResult, GenerationEvent, LoadedModel, SpeechOutput } from 'lia/engine';
import type { ModelCapability, ResolvedModel } from 'lia/model-store';
import type { OnnxHead } from './head.js';
import type { OnnxLayout } from './layout.js';
import type { EncoderSettings } from './model.js';
import type { FromThread, ThreadData, ThreadError, ThreadMethod, ToThread } from './speech-thread.js';

/** The heads that run in a thread of their own. */
const THREAD_HEADS: ReadonlySet<OnnxHead['kind']> = new Set(['ctc', 'whisper', 'moonshine', 'vits']);

/** Whether a model of this head runs in a worker thread of its own. */
export function runsInThread(head: OnnxHead): boolean {
  return THREAD_HEADS.has(head.kind);
}

/**
 * Where a thread starts from, and its flags: from `dist/`, the built `.js` beside this file with
 * the parent's flags (Node passes a worker those it takes); from source, a `data:` module that
 * registers tsx and imports the `.ts`, with the parent's `--conditions` only (`lia-source`: an
 * explicit list may not hold V8 or process flags, and `--import` is what the module stands in for).
 */
function threadStart(): { url: URL; execArgv?: string[] } {
  const here = import.meta.url;
  if (!here.endsWith('.ts')) return { url: new URL('./speech-thread.js', here) };
  const tsx = import.meta.resolve('tsx/esm/api');
  const entry = new URL('./speech-thread.ts', here).href;
  const source = `import { register } from ${JSON.stringify(tsx)};\nregister();\nawait import(${JSON.stringify(entry)});\n`;
  const execArgv: string[] = [];
  const argv = process.execArgv;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i]!.startsWith('--conditions=')) execArgv.push(argv[i]!);
    else if ((argv[i] === '--conditions' || argv[i] === '-C') && argv[i + 1]) execArgv.push(`--conditions=${argv[++i]!}`);
  }
  return { url: new URL(`data:text/javascript,${encodeURIComponent(source)}`), execArgv };
}

function fromThreadError(error: ThreadError): Error {
  if (!error.app) return new Error(error.message);
  const { code, statusCode, param, headers } = error.app;
  return new AppError(code, statusCode, error.message, { param, headers });
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** Starts the thread of `model` and loads it there; resolves once it is loaded. */
export function loadInThread(
  model: ResolvedModel,
  layout: OnnxLayout,
  settings: EncoderSettings,
  log?: FastifyBaseLogger,
  onExit?: (error: Error) => void,
): Promise<LoadedModel> {
  const data: ThreadData = { model, layout, settings };
  const { url, execArgv } = threadStart();
  let worker: Worker;
  try {
    worker = new Worker(url, { workerData: data, ...(execArgv ? { execArgv } : {}) });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    return Promise.reject(Errors.engineFailed(`model "${model.name}" cannot be loaded: its worker thread does not start: ${message}`, { cause: err }));
  }
  return new Promise<LoadedModel>((resolve, reject) => {
    let loaded: ThreadModel | undefined;
    worker.on('message', (message: FromThread) => {
      if (message.type === 'log') log?.[message.level](message.obj, message.msg);
      else if (message.type === 'loaded') {
        loaded = new ThreadModel(model.name, worker, message, settings.sizeBytes, onExit);
        resolve(loaded);
      } else if (!loaded) {
        if (message.type === 'error') {
          reject(fromThreadError(message.error));
          void worker.terminate();
        }
      } else loaded.receive(message);
    });
    worker.on('error', (err) => {
      if (loaded) loaded.died(err);
      else reject(Errors.engineFailed(`model "${model.name}" cannot be loaded: its worker thread failed: ${err.message}`, { cause: err }));
    });
    worker.on('exit', (code) => {
      if (loaded) loaded.died(new Error(`its worker thread exited with code ${code}`));
      else reject(Errors.engineFailed(`model "${model.name}" cannot be loaded: its worker thread exited with code ${code}`));
    });
  });
}

class ThreadModel implements LoadedModel {
  readonly capabilities: readonly ModelCapability[];
  readonly contextLength: number;
  readonly vramBytes = 0;
  readonly audio?: AudioInput;
  readonly speech?: SpeechOutput;
  readonly transcribe?: LoadedModel['transcribe'];
  readonly synthesize?: LoadedModel['synthesize'];
  readonly #pending = new Map<number, Pending>();
  #next = 0;
  #unloading: Promise<void> | undefined;
  #unloaded: (() => void) | undefined;
  /** Set once the thread is gone: why calls fail. */
  #dead: Error | undefined;

  constructor(
    private readonly name: string,
    private readonly worker: Worker,
    loaded: Extract<FromThread, { type: 'loaded' }>,
    readonly sizeBytes: number,
    private readonly onExit?: (error: Error) => void,
  ) {
    this.capabilities = loaded.capabilities;
    this.contextLength = loaded.contextLength;
    if (loaded.audio) this.audio = loaded.audio;
    if (loaded.speech) this.speech = loaded.speech;
    if (this.capabilities.includes('transcription')) this.transcribe = (params, signal) => this.#call('transcribe', params, signal);
    if (this.capabilities.includes('speech')) this.synthesize = (params, signal) => this.#call('synthesize', params, signal);
  }

  generate(): AsyncIterable<GenerationEvent> {
    throw Errors.badRequest(`"${this.name}" does not support generate`);
  }

  chat(): AsyncIterable<GenerationEvent> {
    throw Errors.badRequest(`"${this.name}" does not support chat`);
  }

  embed(): Promise<EmbedResult> {
    return Promise.reject(Errors.badRequest(`"${this.name}" does not support embedding (the "embedding" capability in /api/show)`));
  }

  tokenize: NonNullable<LoadedModel['tokenize']> = (params, signal) => this.#call('tokenize', params, signal);

  detokenize: NonNullable<LoadedModel['detokenize']> = (tokens, signal) => this.#call('detokenize', tokens, signal);

  unload(): Promise<void> {
    this.#unloading ??= this.#dead
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          this.#unloaded = resolve;
          this.#post({ type: 'unload' });
        }).then(() => this.worker.terminate().then(() => undefined));
    return this.#unloading;
  }

  /** A message from the thread about a call (or the unload). */
  receive(message: FromThread): void {
    if (message.type === 'unloaded') return this.#unloaded?.();
    if (message.type === 'result') {
      this.#pending.get(message.id)?.resolve(message.value);
      this.#pending.delete(message.id);
    } else if (message.type === 'error') {
      if (message.id === null) {
        // The unload failed in the thread: the thread is ended all the same.
        this.#unloaded?.();
        return;
      }
      this.#pending.get(message.id)?.reject(fromThreadError(message.error));
      this.#pending.delete(message.id);
    }
  }

  /** The thread is gone: calls fail, and the scheduler forgets the model unless it was being unloaded. */
  died(cause: Error): void {
    if (this.#dead) return;
    const err = Errors.engineFailed(`model "${this.name}" stopped: ${cause.message}; it loads again at the next request`, { cause });
    this.#dead = err;
    for (const pending of this.#pending.values()) pending.reject(err);
    this.#pending.clear();
    this.#unloaded?.();
    if (!this.#unloading) this.onExit?.(err);
  }

  #post(message: ToThread): void {
    this.worker.postMessage(message);
  }

  #call<T>(method: ThreadMethod, arg: unknown, signal: AbortSignal): Promise<T> {
    if (this.#dead) return Promise.reject(this.#dead);
    if (this.#unloading) return Promise.reject(Errors.unavailable(`model "${this.name}" is being unloaded`));
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => this.#post({ type: 'abort', id });
      signal.addEventListener('abort', onAbort, { once: true });
      const settle = () => signal.removeEventListener('abort', onAbort);
      this.#pending.set(id, {
        resolve: (value) => {
          settle();
          resolve(value as T);
        },
        reject: (err) => {
          settle();
          // An aborted call fails as the request's signal says, as it did on the main thread.
          reject(signal.aborted && !this.#dead ? (signal.reason as Error) : err);
        },
      });
      this.#post({ type: 'call', id, method, arg });
    });
  }
}
