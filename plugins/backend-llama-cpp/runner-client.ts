/**
 * The parent's side of a runner: forks `runner/main` with the parent's own loader flags, loads the
 * model there, and exposes it as a {@link LoadedModel} whose calls travel over IPC. When the runner
 * dies on its own (a llama.cpp abort, a segfault, `kill -9`), every request in flight on it fails
 * with a clear `engine failed` error and `onExit` tells the scheduler to forget the model; the
 * next request loads it again in a fresh runner.
 *
 * @module
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { FastifyBaseLogger } from 'fastify';
import { Errors } from 'lia/plugin';
import type { LoadedModel } from 'lia/engine';
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent, RankParams, RankResult, TokenizeParams, TokenizeResult } from 'lia/engine';
import type { ModelCapability } from 'lia/model-store';
import { EventQueue } from './event-queue.js';
import { runnerTunables, type HugePagesMode } from './huge-pages.js';
import type { LoadSpec, ParentMessage, RunnerDevice, RunnerErrorKind, RunnerInfo, RunnerMessage, RunnerResult } from './protocol.js';

/** How long a runner may take to load its model. Defaults to 5 minutes (Ollama's load timeout). */
const LOAD_TIMEOUT_MS = 5 * 60_000;
/** How long an unloading runner may take to exit before it is killed. */
const EXIT_GRACE_MS = 5_000;

interface Pending {
  event(e: GenerationEvent): void;
  result(r: RunnerResult): void;
  error(err: Error): void;
}

/**
 * V8 flags of every runner. A runner's JavaScript keeps little alive and allocates a few kilobytes
 * per token, so V8's default young generation (up to 16 MB per semi-space, kept committed once
 * grown) is mostly empty space: 1 MB semi-spaces save resident memory for a scavenge of a mostly
 * dead megabyte every few hundred tokens (bench/results/2026-11-26-runs.md).
 */
const RUNNER_V8_FLAGS = ['--max-semi-space-size=1'];

/**
 * The runner entry and the Node flags to start it with: {@link RUNNER_V8_FLAGS}, plus tsx's loader
 * when running from the TypeScript sources (never the parent's own `execArgv`, which may carry
 * test or coverage hooks that slow a child down by seconds).
 */
export function runnerCommand(): { entry: string; execArgv: string[] } {
  const here = fileURLToPath(import.meta.url);
  const ext = path.extname(here);
  const entry = path.join(path.dirname(here), 'runner', `main${ext}`);
  if (!existsSync(entry)) throw new Error(`the llama.cpp runner entry is missing: ${entry}`);
  // From the sources, the runner's `lia/*` imports are the sources too (the `lia-source` export
  // condition), not whatever dist/ holds from the last build.
  const fromSource = ext === '.ts' ? ['--conditions=lia-source', '--import', import.meta.resolve('tsx')] : [];
  return { entry, execArgv: [...RUNNER_V8_FLAGS, ...fromSource] };
}

export interface RunnerOptions {
  log: FastifyBaseLogger;
  /** Called once when the runner dies without being asked to. */
  onExit?: (error: Error) => void;
}

/**
 * libuv pool threads of a runner: one per core, 2 to 6. Its jobs are one decode at a time per
 * context (generation and embedding), a model load, and the per-sequence sampling after each
 * decode, which is short and CPU-bound: threads beyond the cores only make 16 sampling jobs fight
 * over them (bench/results/2026-11-27-code-notes.md).
 */
const RUNNER_POOL_THREADS = Math.min(6, Math.max(2, os.availableParallelism()));

/** How runner processes start (the backend's options). */
export interface SpawnOptions {
  /** `auto` (CUDA, Vulkan, then CPU) or `false` (CPU only). */
  gpu: 'auto' | false;
  /** Transparent huge pages for llama.cpp's buffers (see huge-pages.ts). */
  hugePages: HugePagesMode;
}

/**
 * Forks a runner and has it load the llama.cpp bindings at once, so that a later load only has to
 * read the model (the bindings take seconds: importing them and probing the binary).
 */
export function spawnRunner({ gpu, hugePages }: SpawnOptions): ChildProcess {
  const { entry, execArgv } = runnerCommand();
  const tunables = runnerTunables(hugePages, process.env.GLIBC_TUNABLES);
  const child = fork(entry, [], {
    execArgv,
    serialization: 'advanced',
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: {
      ...process.env,
      // Decodes, sampling and loads are libuv jobs: the pool is sized for them (RUNNER_POOL_THREADS).
      UV_THREADPOOL_SIZE: String(RUNNER_POOL_THREADS),
      ...(tunables === undefined ? {} : { GLIBC_TUNABLES: tunables }),
    },
  });
  child.send({ t: 'prepare', gpu } satisfies ParentMessage);
  return child;
}

/**
 * The GPU a runner from {@link spawnRunner} would load a model on, with its free memory now
 * (empty: the CPU). A runner that dies or does not answer within the load timeout counts as none.
 */
export function runnerDevices(child: ChildProcess): Promise<RunnerDevice[]> {
  return new Promise((resolve) => {
    const done = (devices: RunnerDevice[]): void => {
      clearTimeout(timer);
      child.off('message', receive);
      child.off('exit', gone);
      resolve(devices);
    };
    const receive = (m: RunnerMessage): void => {
      if (m.t === 'devices') done(m.devices);
    };
    const gone = (): void => done([]);
    const timer = setTimeout(gone, LOAD_TIMEOUT_MS);
    child.on('message', receive);
    child.once('exit', gone);
    child.send({ t: 'devices' } satisfies ParentMessage);
  });
}

/**
 * Loads `spec` in `child`, a runner from {@link spawnRunner}; rejects if the load fails or the
 * runner dies.
 */
export async function startRunner(spec: LoadSpec, options: RunnerOptions, child: ChildProcess): Promise<RunnerModel> {
  const model = new RunnerModel(child, spec, options);
  await model.ready;
  return model;
}

export class RunnerModel implements LoadedModel {
  capabilities: readonly ModelCapability[] = [];
  contextLength = 0;
  sizeBytes = 0;
  vramBytes = 0;
  /** The store name of the model (set by the backend, for diagnostics). */
  modelName = '';
  /** The LoRA adapters its context applies (set by the backend). */
  adapters: LoadedModel['adapters'];
  /** The speculative decoding its sequences run with (set by the backend). */
  speculation: LoadedModel['speculation'];
  /** Facts the runner reported after loading. */
  info: RunnerInfo | null = null;
  /** The thread counts it was loaded with: small batches, and large ones when it runs alone. */
  readonly threads: number;
  readonly batchThreads: number;
  /** The thread count of its large batches now (see {@link setBatchThreads}). */
  currentBatchThreads: number;
  readonly ready: Promise<void>;
  readonly #child: ChildProcess;
  readonly #options: RunnerOptions;
  readonly #pending = new Map<number, Pending>();
  /** When a message last went to or came from the runner (`performance.now()`). */
  #lastActive = performance.now();
  #nextId = 1;
  #dead: Error | null = null;
  #unloading = false;
  #loaded = false;
  #exited: Promise<void>;

  constructor(child: ChildProcess, spec: LoadSpec, options: RunnerOptions) {
    this.#child = child;
    this.#options = options;
    this.threads = spec.threads;
    this.batchThreads = spec.batchThreads ?? spec.threads;
    this.currentBatchThreads = this.batchThreads;
    const log = options.log;
    forwardLines(child.stderr, (line) => log.warn({ runner: child.pid }, line));
    forwardLines(child.stdout, (line) => log.info({ runner: child.pid }, line));
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()));
    this.ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(Errors.engineFailed(`loading ${path.basename(spec.modelPath)} took longer than ${LOAD_TIMEOUT_MS / 1000} s`));
        child.kill('SIGKILL');
      }, LOAD_TIMEOUT_MS);
      const receive = (m: RunnerMessage): void => {
        if (m.t === 'batch') {
          for (const one of m.messages) receive(one);
        } else if (m.t === 'ready') {
          clearTimeout(timer);
          this.info = m.info;
          this.capabilities = m.info.capabilities;
          this.contextLength = m.info.contextLength;
          this.sizeBytes = m.info.sizeBytes;
          this.vramBytes = m.info.vramBytes;
          this.#loaded = true;
          resolve();
        } else if (m.t === 'load_error') {
          clearTimeout(timer);
          reject(Errors.engineFailed(`cannot load the model: ${m.message}`));
        } else {
          this.#onMessage(m);
        }
      };
      child.on('message', receive);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        const how = signal ? `signal ${signal}` : `exit code ${code}`;
        const err = Errors.engineFailed(`the model runner stopped (${how}) while serving this request; the model will be loaded again on the next request`);
        // Before `ready` only: a death by signal is an engine crash, which the scheduler retries
        // once and then takes to another engine (none for GGUF on node-llama-cpp: a clean error).
        reject(
          signal
            ? Errors.engineCrashed(`the model runner died of ${signal} while loading the model`, { crash: { engine: 'llama-cpp', signal } })
            : Errors.engineFailed(`the model runner stopped (${how}) while loading the model`),
        );
        this.#die(err);
      });
      child.on('error', (err) => log.error({ err }, 'runner process error'));
    });
    this.#send({ t: 'load', spec });
  }

  /** The runner's process id (tests kill it to check crash isolation). */
  get pid(): number | undefined {
    return this.#child.pid;
  }

  generate(params: GenerateParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.#stream({ t: 'generate', params }, signal);
  }

  chat(params: ChatParams, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    return this.#stream({ t: 'chat', params }, signal);
  }

  embed(params: EmbedParams, signal: AbortSignal): Promise<EmbedResult> {
    return this.#call<EmbedResult>({ t: 'embed', params }, signal);
  }

  countChatTokens(params: ChatParams, signal: AbortSignal): Promise<number> {
    return this.#call<number>({ t: 'count', params }, signal);
  }

  rank(params: RankParams, signal: AbortSignal): Promise<RankResult> {
    return this.#call<RankResult>({ t: 'rank', params }, signal);
  }

  tokenize(params: TokenizeParams, signal: AbortSignal): Promise<TokenizeResult> {
    return this.#call<TokenizeResult>({ t: 'tokenize', params }, signal);
  }

  detokenize(tokens: number[], signal: AbortSignal): Promise<string> {
    return this.#call<string>({ t: 'detokenize', tokens }, signal);
  }

  /** One request answered by one `result` message. */
  #call<R extends RunnerResult>(message: DistributiveOmit<Extract<ParentMessage, { id: number }>, 'id'>, signal: AbortSignal): Promise<R> {
    if (this.#dead) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    return new Promise<R>((resolve, reject) => {
      const onAbort = () => {
        this.#pending.delete(id);
        this.#send({ t: 'abort', id });
        reject(signal.reason);
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      const settle = () => {
        signal.removeEventListener('abort', onAbort);
        this.#pending.delete(id);
      };
      this.#pending.set(id, {
        event: () => undefined,
        result: (r) => (settle(), resolve(r as R)),
        error: (e) => (settle(), reject(e)),
      });
      this.#send({ ...message, id });
    });
  }

  async unload(): Promise<void> {
    if (!this.#unloading) {
      this.#unloading = true;
      if (this.#child.exitCode === null && this.#child.signalCode === null) {
        this.#send({ t: 'unload' });
        const timer = setTimeout(() => this.#child.kill('SIGKILL'), EXIT_GRACE_MS);
        await this.#exited;
        clearTimeout(timer);
      }
    }
    await this.#exited;
  }

  async *#stream(message: { t: 'generate'; params: GenerateParams } | { t: 'chat'; params: ChatParams }, signal: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.#dead) throw this.#dead;
    const id = this.#nextId++;
    const queue = new EventQueue<GenerationEvent>();
    let finished = false;
    this.#pending.set(id, {
      event: (e) => queue.push(e),
      result: () => undefined,
      error: (e) => queue.fail(e),
    });
    const onAbort = () => queue.fail(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      if (signal.aborted) throw signal.reason;
      this.#send({ ...message, id });
      for await (const event of queue) {
        if (event.type === 'done') finished = true;
        yield event;
        if (finished) return;
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.#pending.delete(id);
      // The consumer stopped early (client gone, error): stop the generation in the runner too.
      if (!finished && !this.#dead) this.#send({ t: 'abort', id });
    }
  }

  #onMessage(m: RunnerMessage): void {
    this.#lastActive = performance.now();
    switch (m.t) {
      case 'event':
        this.#pending.get(m.id)?.event(m.event);
        return;
      case 'result':
        this.#pending.get(m.id)?.result(m.result);
        return;
      case 'error':
        this.#pending.get(m.id)?.error(runnerError(m.kind, m.message));
        return;
      case 'log':
        this.#options.log[m.level]({ runner: this.#child.pid }, m.message);
        return;
      default:
        return;
    }
  }

  #die(error: Error): void {
    if (this.#dead) return;
    this.#dead = error;
    for (const p of this.#pending.values()) p.error(error);
    this.#pending.clear();
    if (!this.#unloading && this.#loaded) {
      this.#options.log.error({ runner: this.#child.pid }, error.message);
      this.#options.onExit?.(error);
    }
  }

  /** The thread count of its large batches from now on (not a request: the runner stays quiet). */
  setBatchThreads(threads: number): void {
    this.currentBatchThreads = threads;
    if (this.#child.connected) this.#child.send({ t: 'threads', batch: threads } satisfies ParentMessage);
  }

  #send(message: ParentMessage): void {
    this.#lastActive = performance.now();
    if (this.#child.connected) this.#child.send(message);
  }

  /** Since when (`performance.now()`) the runner has had no request in flight; `null` while it has. */
  get quietSince(): number | null {
    return this.#pending.size > 0 ? null : this.#lastActive;
  }
}

/** Sends each non-empty line of a runner's output to `sink` (a last line without a newline too). */
/** `Omit` over each member of a union. */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

function forwardLines(stream: NodeJS.ReadableStream | null, sink: (line: string) => void): void {
  if (!stream) return;
  createInterface({ input: stream, crlfDelay: Infinity }).on('line', (raw) => {
    const line = raw.trim();
    if (line) sink(line);
  });
}

/** The appliance's error for a runner's error message. */
function runnerError(kind: RunnerErrorKind, message: string): Error {
  if (kind === 'context_length') return Errors.contextLengthExceeded(message);
  return kind === 'bad_request' ? Errors.badRequest(message) : Errors.engineFailed(message);
}
