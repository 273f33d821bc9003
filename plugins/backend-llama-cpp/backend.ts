/**
 * The llama.cpp inference backend: runs GGUF models with node-llama-cpp, each loaded model in its
 * own runner process (see `runner-client.ts`). It never compiles or downloads anything
 * (`build: "never"`) and uses CUDA or Vulkan when a prebuilt binary for them works (`gpu: "auto"`).
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import type { FastifyBaseLogger } from 'fastify';
import type { FormatHandler, InferenceBackend } from 'lia/engine';
import type { LoadOptions, MemoryEstimate, Speculation } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { estimateBytes, fileBytes, readShape } from 'lia/gguf';
import type { HugePagesMode } from './huge-pages.js';
import { CpuPlacement, type CpuAffinityMode } from './placement.js';
import { runnerDevices, spawnRunner, startRunner, type RunnerModel, type SpawnOptions } from './runner-client.js';
import type { LoadSpec } from './protocol.js';

/**
 * How long every loaded model must have been without work before the next spare runner starts.
 * Defaults to 1 s (see `#refillWhenQuiet`).
 */
const SPARE_QUIET_MS = 1000;

/** Resident memory of an idle runner process (Node + the llama.cpp bindings), with a margin (bench/results/2026-11-27-code-notes.md). */
const RUNNER_OVERHEAD_BYTES = 48 * 1024 * 1024;

export interface LlamaCppBackendOptions {
  log: FastifyBaseLogger;
  /** The `gguf` format's handler (the `gguf` plugin's hook). */
  format: FormatHandler;
  /** `auto` (CUDA, Vulkan, then CPU) or `false` (CPU only). Defaults to `auto`. */
  gpu?: 'auto' | false;
  /** Prompt batch size in tokens when the engine does not say. Defaults to 512. */
  batchSize?: number;
  /**
   * Keep one spare runner with the bindings already loaded, so a load (or the reload after a
   * crash) only reads the model. Defaults to true.
   */
  prewarm?: boolean;
  /** Bind each runner to CPUs of its own when there are enough (see placement.ts). Defaults to `off`. */
  cpuAffinity?: CpuAffinityMode;
  /** Ask glibc for transparent huge pages in runners (see huge-pages.ts). Defaults to `auto`. */
  hugePages?: HugePagesMode;
}

export class LlamaCppBackend implements InferenceBackend {
  readonly name = 'llama-cpp';
  /** node-llama-cpp applies LoRA adapters to a context when it is created: a model with other adapters (or scales) is another load. */
  readonly adapters = 'load' as const;
  /**
   * Speculative decoding with node-llama-cpp's token predictors (a draft model's sequence, or input
   * lookup), one token per step: its draft predictor falls out of step with the model beyond that
   * (docs/backends.md).
   */
  readonly speculation = {
    kinds: ['draft', 'ngram'] as const,
    maxDraft: 1,
    why: "node-llama-cpp 3.22.1's draft predictor loses step with the model when it drafts more: the model as its own draft accepted 46-75 % of one-token drafts and 24-35 % of 2-4-token drafts",
  };
  readonly formats: readonly FormatHandler[];
  readonly #options: Required<LlamaCppBackendOptions>;
  readonly #runners = new Set<RunnerModel>();
  #spare: ChildProcess | null = null;
  #closed = false;
  #refillTimer: NodeJS.Timeout | undefined;
  readonly #placement: CpuPlacement;
  /**
   * Model files (content-addressed blob paths) whose GGUF template no specialised chat wrapper
   * renders: their next load skips that search (see `LoadSpec.knownChatWrapper`). Kept for the
   * process's lifetime; a model file never changes under its path.
   */
  readonly #jinjaOnly = new Set<string>();
  /** Whether the bindings' GPU back end last listed a device ({@link devices}). */
  #gpuSeen = false;

  constructor(options: LlamaCppBackendOptions) {
    this.#options = { gpu: 'auto', batchSize: 512, prewarm: true, cpuAffinity: 'off', hugePages: 'auto', ...options };
    this.formats = [options.format];
    this.#placement = new CpuPlacement(this.#options.cpuAffinity);
  }

  /**
   * Starts keeping a spare runner (with `prewarm`). The plugin calls it once the appliance is
   * ready and only when this backend serves GGUF, so an appliance whose GGUF models all run on
   * another engine (`backends: { gguf: llama-server }`) holds no idle runner.
   */
  prewarm(): void {
    this.#refill();
  }

  async estimateMemory(model: ResolvedModel, options: LoadOptions): Promise<MemoryEstimate> {
    const [shape, bytes] = await Promise.all([readShape(model.modelPath), fileBytes(model.modelPath)]);
    const totalBytes = estimateBytes(shape, bytes, {
      contextLength: options.contextLength ?? 0,
      parallel: options.parallel,
      batchSize: options.batchSize ?? this.#options.batchSize,
      kvCacheType: options.kvCacheType,
    });
    // The runner loads no projector: the weights alone, plus the runner process.
    return { totalBytes: totalBytes + RUNNER_OVERHEAD_BYTES, vramBytes: 0, processBytes: RUNNER_OVERHEAD_BYTES };
  }

  /**
   * The GPU node-llama-cpp would load on, read live from the spare runner (started now when there
   * is none; the load that follows takes it): the engine's offload plan decides from it, as for
   * llama-server. None with `gpu: false`, or when the bindings found no GPU.
   */
  async devices(): Promise<{ id: string; name: string; totalBytes: number; freeBytes: number }[]> {
    if (this.#options.gpu === false || this.#closed) return [];
    if (!this.#spare) this.#refill(true);
    const devices = this.#spare ? await runnerDevices(this.#spare) : [];
    this.#gpuSeen = devices.length > 0;
    return devices;
  }

  async load(model: ResolvedModel, options: LoadOptions): Promise<RunnerModel> {
    const log = this.#options.log.child({ model: model.name });
    // The runner may exit before startRunner returns (a failed load): `runner` is unset then.
    let runner: RunnerModel | undefined;
    // A model the plan keeps on the CPU of a machine with a GPU runs on the CPU-only bindings: with
    // the GPU back end loaded and no layer offloaded, llama.cpp still sends large batches to the
    // device (and its answers then differ from the CPU's), as llama-server does without `--device none`.
    const gpu = options.offload && !options.offload.device && this.#gpuSeen ? false : this.#options.gpu;
    const onExit = (err: Error): void => {
      if (runner) this.#forget(runner);
      options.onExit?.(err);
    };
    runner = await startRunner(
      {
        modelPath: model.modelPath,
        contextLength: options.contextLength ?? 0,
        parallel: options.parallel,
        threads: options.threads,
        batchThreads: options.batchThreads ?? options.threads,
        batchSize: options.batchSize ?? this.#options.batchSize,
        gpu,
        // The engine's offload plan, carried out (none: node-llama-cpp fits the layers itself).
        ...(options.offload ? { gpuLayers: options.offload.device ? options.offload.gpuLayers : 0 } : {}),
        ...(options.kvCacheType ? { kvCacheType: options.kvCacheType } : {}),
        ...(options.flashAttention !== undefined ? { flashAttention: options.flashAttention } : {}),
        ...(options.adapters?.length ? { adapters: options.adapters } : {}),
        ...(options.speculation ? { speculation: runnerSpeculation(options.speculation) } : {}),
        ...(model.template ? { template: model.template } : {}),
        ...(this.#jinjaOnly.has(model.modelPath) ? { knownChatWrapper: 'JinjaTemplate' as const } : {}),
      },
      { log, onExit },
      (gpu === this.#options.gpu ? this.#takeSpare() : undefined) ?? spawnRunner({ ...this.#spawnOptions(), gpu }),
    );
    this.#refillWhenQuiet();
    if (runner.info?.chatWrapper === 'JinjaTemplate') this.#jinjaOnly.add(model.modelPath);
    runner.modelName = model.name;
    if (options.adapters?.length) runner.adapters = { loaded: options.adapters, perRequest: false };
    if (options.speculation) runner.speculation = options.speculation;
    this.#runners.add(runner);
    this.#shareCpus();
    const cpus = runner.pid === undefined ? null : await this.#placement.place(runner.pid, options.threads);
    log.info(
      {
        pid: runner.pid,
        contextLength: runner.contextLength,
        parallel: options.parallel,
        threads: options.threads,
        currentBatchThreads: runner.currentBatchThreads,
        cpus,
        ...runner.info,
      },
      'model loaded',
    );
    const loaded = runner;
    const unload = loaded.unload.bind(loaded);
    loaded.unload = async () => {
      this.#forget(loaded);
      await unload();
    };
    return loaded;
  }

  /** A runner is gone or going: it no longer counts, nor holds CPUs. */
  #forget(runner: RunnerModel): void {
    if (!this.#runners.delete(runner)) return;
    if (runner.pid !== undefined) void this.#placement.release(runner.pid);
    this.#shareCpus();
  }

  /**
   * Large batches get their own (larger) thread count only while one model is loaded: two
   * runners each spinning more threads than their share of the cores would take turns on them
   * (llama.cpp's threads wait on each other by spinning), so with several, every batch runs on
   * the count of small ones, as before batch threads existed.
   */
  #shareCpus(): void {
    const alone = this.#runners.size === 1;
    for (const r of this.#runners) r.setBatchThreads(alone ? r.batchThreads : r.threads);
  }

  /** The runner processes of the loaded models and their large-batch thread counts (for diagnostics and tests). */
  processes(): { model: string; pid: number; currentBatchThreads: number }[] {
    return [...this.#runners].flatMap((r) => (r.pid === undefined ? [] : [{ model: r.modelName, pid: r.pid, currentBatchThreads: r.currentBatchThreads }]));
  }

  #spawnOptions(): SpawnOptions {
    return { gpu: this.#options.gpu, hugePages: this.#options.hugePages };
  }

  /** The spare runner if it is still alive, taken out of the pool and referenced again. */
  #takeSpare(): ChildProcess | undefined {
    const spare = this.#spare;
    this.#spare = null;
    if (!spare || !spare.connected || spare.exitCode !== null || spare.signalCode !== null) return undefined;
    setReferenced(spare, true);
    return spare;
  }

  /**
   * Starts the next spare once no loaded model has had a request in flight for
   * {@link SPARE_QUIET_MS}, not right after the load that took the last one: a spare's start-up
   * (Node, node-llama-cpp's import and binary probe) takes seconds of CPU, which on a small machine
   * lands on the new model's first requests (bench/results/2026-11-engine.md, *Spare runner start-up*). On a server that is
   * never quiet the next load starts a runner of its own.
   */
  #refillWhenQuiet(): void {
    if (!this.#options.prewarm || this.#closed || this.#spare || this.#refillTimer) return;
    const timer = setInterval(() => {
      const now = performance.now();
      const quiet = [...this.#runners].every((r) => r.quietSince !== null && now - r.quietSince >= SPARE_QUIET_MS);
      if (!quiet) return;
      clearInterval(timer);
      this.#refillTimer = undefined;
      this.#refill();
    }, SPARE_QUIET_MS / 4);
    timer.unref();
    this.#refillTimer = timer;
  }

  /** Starts a new spare runner unless there is one (it does not keep the process alive); `always`: even without `prewarm`. */
  #refill(always = false): void {
    if ((!this.#options.prewarm && !always) || this.#closed || this.#spare) return;
    const spare = spawnRunner(this.#spawnOptions());
    spare.once('exit', () => {
      if (this.#spare === spare) this.#spare = null;
    });
    spare.on('error', () => undefined);
    setReferenced(spare, false);
    this.#spare = spare;
  }

  /** Stops every runner (shutdown). */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#refillTimer);
    this.#spare?.kill();
    this.#spare = null;
    await Promise.all([...this.#runners].map((r) => r.unload()));
    this.#runners.clear();
  }
}

/** Whether a child (its process, IPC channel and pipes) keeps the event loop alive. */
function setReferenced(child: ChildProcess, referenced: boolean): void {
  type Handle = { ref?(): void; unref?(): void } | null | undefined;
  for (const h of [child, child.channel, child.stdout, child.stderr] as Handle[]) {
    if (referenced) h?.ref?.();
    else h?.unref?.();
  }
}

/** The engine's speculation as the runner takes it (a file path, no model names). */
function runnerSpeculation(s: Speculation): NonNullable<LoadSpec['speculation']> {
  return s.kind === 'draft' ? { draftPath: s.draft.path, maxDraft: s.maxDraft } : { ngram: s.ngram, maxDraft: s.maxDraft };
}
