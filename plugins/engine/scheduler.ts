/**
 * The scheduler: owns every loaded model's lifecycle, as Ollama's `sched.go` does. It loads a model
 * on its first request (through the backend that runs its format), hands out one of `parallel`
 * slots per request (the backend batches the slots' sequences together), queues requests beyond
 * that up to `maxQueue` (then 503 with a `Retry-After` from the queue's measured drain rate, drain.ts), and unloads a model when its `keep_alive`
 * runs out, when a load needs its memory (idle models first, least recently used first), or when
 * asked. A model that is in use is never unloaded: it is marked and goes once its last request ends.
 * A runner crash makes the scheduler forget the model; waiting requests load it again.
 *
 * @module
 */
import type { FastifyBaseLogger } from 'fastify';
import { Errors, isAppError, type EngineCrash } from 'lia/plugin';
import type { BackendRegistry, InferenceBackend } from './public.js';
import type { LoadedModel } from './public.js';
import type { KvCacheType, LoadOptions } from './public.js';
import type { LoadedModelInfo } from './public.js';
import type { ModelAdapter, ResolvedModel } from 'lia/model-store';
import type { AdapterScale, Speculation } from './public.js';
import { sameSpeculation } from './plan/speculation.js';
import type { InferenceEvent } from 'lia/plugin/contracts';
import type { ModelActivity } from './public.js';
import { bytesOn, devicesOf, ON_CPU, planOffload, type Offload } from './plan/offload.js';
import { DrainRate } from './drain.js';

export interface SchedulerOptions {
  backends: BackendRegistry;
  log: FastifyBaseLogger;
  /** Slots (concurrent sequences) per model. */
  parallel: number;
  /** Requests that may wait for a slot or a load, across all models; more get a 503. */
  maxQueue: number;
  /** Default keep-alive in ms (Infinity = forever). */
  keepAliveMs: number;
  /** Models loaded at once. */
  maxLoadedModels: number;
  /** Bytes the loaded models may use together (estimates before loading, real sizes after). */
  memoryBudgetBytes: number;
  /** Default context length per sequence (0 = the model's trained context). */
  contextLength: number;
  /** CPU threads per model. */
  threads: number;
  /** CPU threads per model for large batches (the backend may use fewer while others are loaded). Defaults to `threads`. */
  batchThreads?: number;
  batchSize?: number;
  /** Told of loads, unloads and runner crashes (`hooks.inferenceObservers`). Defaults to nobody. */
  observe?: (event: InferenceEvent) => void;
  /** At most this many bytes of each GPU for the loaded models together; undefined: what the device has free. */
  gpuMemoryCapBytes?: number;
  /** The KV cache type and flash attention of a model that names none (config `engine.kvCacheType`, `engine.flashAttention`). */
  kvCacheType?: KvCacheType;
  flashAttention?: boolean;
  /** Bytes of each GPU left to its driver and other programs when layers are fitted. Defaults to 0. */
  gpuReserveBytes?: number;
  /**
   * The stored models (the store's `list`), to find the LoRA adapters of every model that shares a
   * model's weights: a backend that switches adapters per request loads them all with the weights.
   * Defaults to none (each model's own adapters only).
   */
  storedModels?: () => Promise<readonly ResolvedModel[]>;
}

/** A held slot of a loaded model; `release` exactly once when the request ends (extra calls are ignored). */
export interface Lease {
  model: LoadedModel;
  /** The backend that runs it. */
  engine: string;
  /** Nanoseconds this request waited for the model to load (0 when it was loaded). */
  loadNs: number;
  release(): void;
}

export interface AcquireOptions {
  /** The request's keep_alive in ms; undefined keeps the model's current one. */
  keepAliveMs?: number;
  /**
   * The request's `num_ctx` (its own or the model's stored parameter); undefined asks for the
   * engine's `contextLength`. See `#tooSmall` for when a model is reloaded.
   */
  contextLength?: number;
  /** The request's `num_gpu` (its own or the model's stored parameter), used when this request loads the model; undefined: automatic. */
  numGpu?: number;
  /** `kv_cache_type` and `flash_attention` (the request's or the model's stored parameters), used like `numGpu`; undefined: the engine's defaults. */
  kvCacheType?: KvCacheType;
  flashAttention?: boolean;
  /** `num_parallel` (the request's or the model's stored parameter), used like `numGpu`; undefined: the engine's `parallel`. */
  parallel?: number;
  /** Speculative decoding as the request plan decided it (plan/speculation.ts), used like `numGpu`; undefined: none. */
  speculation?: Speculation;
}

/** A request waiting for a slot; `ask` is its `contextLength`. */
type Waiter = { grant: (retry: boolean) => void; reject: (err: unknown) => void; ask: number | undefined };

/** Far-future expiry shown for "forever", like Ollama's now + MaxInt64 ns. */
const FOREVER_MS = 292 * 365.25 * 24 * 3600 * 1000;

class Instance {
  model: LoadedModel | null = null;
  /** The backend that loaded `model`. */
  engine = '';
  /** Host memory the load is expected to take: the backend's estimate less what the offload plan puts on a GPU. */
  estimateBytes = 0;
  active = 0;
  waiters: Waiter[] = [];
  timer: NodeJS.Timeout | null = null;
  expiresAt = 0;
  lastUsed = Date.now();
  /** The context length asked for at load (0 = the model's own); the loaded one may be clamped. */
  contextAsked = 0;
  /** `num_gpu` asked for at load; undefined: automatic. */
  numGpu: number | undefined;
  /** Slots it is loaded with (`num_parallel`, else the engine's). */
  parallel = 1;
  /** The KV cache type and flash attention it is loaded with. */
  cache: Pick<LoadOptions, 'kvCacheType' | 'flashAttention'> = {};
  /** Where the offload plan put the model (null: no plan, the backend decided). */
  offload: Offload | null = null;
  /** The speculative decoding it is loaded with. */
  speculation: Speculation | undefined;
  gone = false;
  unloading: Promise<void> | null = null;
  readonly goneWaiters: (() => void)[] = [];
  constructor(
    readonly resolved: ResolvedModel,
    public keepAliveMs: number,
  ) {}

  get idle(): boolean {
    return this.active === 0 && this.waiters.length === 0;
  }
}

export class Scheduler {
  readonly #o: SchedulerOptions;
  readonly #instances = new Map<string, Instance>();
  #queued = 0;
  /** Waiters granted a slot, across all models: the `Retry-After` of a full queue. */
  readonly #drain = new DrainRate();
  #loadChain: Promise<unknown> = Promise.resolve();
  #changed: (() => void)[] = [];
  /**
   * Engines that died of a signal twice loading a model, by digest (engine → signal): the model's
   * later loads, in this process, skip them.
   */
  readonly #crashedEngines = new Map<string, Map<string, string>>();

  constructor(options: SchedulerOptions) {
    this.#o = options;
  }

  /** Loads `model` if needed and waits for a free slot. */
  async acquire(model: ResolvedModel, options: AcquireOptions, signal: AbortSignal): Promise<Lease> {
    const started = process.hrtime.bigint();
    let loaded = true;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      let inst = this.#instances.get(model.name) ?? this.#host(model, options);
      const hosted = inst !== undefined && inst.resolved.name !== model.name;
      if (
        inst &&
        !hosted &&
        inst.active === 0 &&
        inst.model &&
        !inst.unloading &&
        (inst.resolved.digest !== model.digest || this.#tooSmall(inst, options.contextLength))
      ) {
        await this.#reload(inst, model, options);
        continue;
      }
      const free = inst?.model && inst.active < this.#slots(inst) && inst.waiters.length === 0 && !this.#tooSmall(inst, options.contextLength);
      if (!free && this.#queued >= this.#o.maxQueue) {
        throw Errors.unavailable('server busy, please try again.  maximum pending requests exceeded', {
          headers: { 'Retry-After': String(this.#drain.retryAfterSeconds(this.#queued)) },
        });
      }
      if (!inst) {
        inst = this.#create(model, options);
        loaded = false;
      }
      if (options.keepAliveMs !== undefined && !hosted) inst.keepAliveMs = options.keepAliveMs;
      this.#clearTimer(inst);
      if (free) {
        inst.active++;
        return this.#lease(inst, started, loaded);
      }
      if (!inst.model) loaded = false;
      // A granted waiter's slot is already counted (see #pump).
      const retry = await this.#wait(inst, options.contextLength, signal);
      if (!retry) return this.#lease(inst, started, loaded);
    }
  }

  /** The loaded models, longest-lived first (as `/api/ps` lists them). */
  ps(): LoadedModelInfo[] {
    const now = Date.now();
    return [...this.#instances.values()]
      .filter((i) => i.model !== null && !i.gone)
      .map((i) => {
        const m = i.model as LoadedModel;
        const expires = i.idle ? i.expiresAt : now + (i.keepAliveMs === Infinity ? FOREVER_MS : i.keepAliveMs);
        return {
          name: i.resolved.name,
          model: i.resolved.name,
          digest: i.resolved.digest,
          size: m.sizeBytes,
          size_vram: m.vramBytes,
          expires_at: new Date(Math.min(expires, 8.64e15)).toISOString(),
          context_length: m.contextLength,
          engine: i.engine,
          device: deviceOf(i),
          parallel: this.#slots(i),
          running: i.active,
          queued: i.waiters.length,
          kv_cache_type: i.cache.kvCacheType ?? 'f16',
          flash_attention: i.cache.flashAttention === undefined ? ('auto' as const) : i.cache.flashAttention ? ('on' as const) : ('off' as const),
          ...speculationShown(i.speculation),
        };
      })
      .sort((a, b) => b.expires_at.localeCompare(a.expires_at));
  }

  /** Requests waiting for a slot or a load, and requests holding a slot, across all models. */
  stats(): { queued: number; active: number; loaded: number } {
    let active = 0;
    for (const i of this.#instances.values()) active += i.active;
    return { queued: this.#queued, active, loaded: this.ps().length };
  }

  /** Every model held or being loaded, with its waiting and active requests. */
  activity(): ModelActivity[] {
    return [...this.#instances.values()]
      .filter((i) => !i.gone)
      .map((i) => ({
        model: i.resolved.name,
        queued: i.waiters.length,
        active: i.active,
        slots: this.#slots(i),
        loaded: i.model !== null,
        sizeBytes: i.model?.sizeBytes ?? 0,
        vramBytes: i.model?.vramBytes ?? 0,
        engine: i.model ? i.engine : '',
        device: i.model ? deviceOf(i) : '',
      }));
  }

  /** The resolved model behind a loaded name (for `/api/ps` details). */
  loadedModel(name: string): ResolvedModel | undefined {
    return this.#instances.get(name)?.resolved;
  }

  /**
   * Unloads `name` now if it is idle, else as soon as its last request ends. With `wait`, resolves
   * only once it is gone (the store's delete waits for this).
   */
  async unload(name: string, wait = false): Promise<void> {
    const inst = this.#instances.get(name);
    if (!inst) return;
    inst.keepAliveMs = 0;
    if (inst.idle) return this.#unload(inst);
    if (wait) await new Promise<void>((resolve) => inst.goneWaiters.push(resolve));
  }

  /** Unloads every model, waiting for requests in flight (shutdown, svc-inference stop). */
  async unloadAll(): Promise<void> {
    await Promise.all([...this.#instances.keys()].map((name) => this.unload(name, true)));
  }

  /** Unloads every model at once, failing requests in flight (process shutdown). */
  async shutdown(): Promise<void> {
    const all = [...this.#instances.values()];
    for (const inst of all) for (const w of inst.waiters.splice(0)) w.reject(Errors.unavailable('the appliance is shutting down'));
    await Promise.all(all.map((inst) => this.#unload(inst)));
  }

  /**
   * Whether the loaded context is smaller than a request wants (its `num_ctx`, else the engine's
   * default, 0 = the model's own) and could be larger: the one reason to load a model again with
   * another context. An idle model is reloaded at once; a busy one takes no more requests until
   * it is idle (the request waits, and those after it). A larger context serves a smaller ask as
   * it is, so clients that differ on `num_ctx` do not reload the model on every turn. A model
   * clamped to its trained context, or whose backend loads a length of its own (an ONNX model),
   * is not reloaded for a larger ask.
   */
  #tooSmall(inst: Instance, asked: number | undefined): boolean {
    const loaded = inst.model?.contextLength;
    if (loaded === undefined || inst.contextAsked === 0 || loaded < inst.contextAsked) return false;
    const want = asked ?? this.#o.contextLength;
    return want === 0 || want > loaded;
  }

  /**
   * Unloads an instance with no request in flight and queues the load of its successor with the
   * request's context; requests that waited for the old one start over and wait for the new one.
   */
  async #reload(inst: Instance, model: ResolvedModel, options: AcquireOptions): Promise<void> {
    const waiting = inst.waiters.splice(0);
    await this.#unload(inst);
    if (!this.#instances.has(model.name)) this.#create(model, options);
    for (const w of waiting) w.grant(true);
  }

  /**
   * A loaded model that can serve `model` without a load of its own: the same weights, projector
   * and template, loaded alike (slots, cache, a context large enough), on a backend that switches
   * LoRA adapters per request, holding every adapter `model` names. A base and the models that
   * only add adapters to it then share one loaded base, as vLLM serves its LoRA modules.
   */
  #host(model: ResolvedModel, options: AcquireOptions): Instance | undefined {
    if (model.remote) return undefined;
    const parallel = options.parallel ?? this.#o.parallel;
    const cache = cacheOptions(options.kvCacheType ?? this.#o.kvCacheType, options.flashAttention ?? this.#o.flashAttention);
    const wanted = (model.adapters ?? []).map((a) => a.path);
    for (const i of this.#instances.values()) {
      // The loaded model says what it holds and whether a request may set other scales.
      const held = i.model?.adapters;
      if (!held?.perRequest || i.gone || i.unloading || !sameBase(i.resolved, model)) continue;
      if (i.parallel !== parallel || i.cache.kvCacheType !== cache.kvCacheType || i.cache.flashAttention !== cache.flashAttention) continue;
      if (i.numGpu !== options.numGpu || this.#tooSmall(i, options.contextLength)) continue;
      if (!sameSpeculation(i.speculation, options.speculation)) continue;
      if (wanted.every((p) => held.loaded.some((a) => a.path === p))) return i;
    }
    return undefined;
  }

  /**
   * The adapters a load on `backend` holds: on one that switches them per request, every adapter of
   * the stored models sharing the weights, off until a request names it; on one that applies them
   * at load, the model's own at scale 1. A backend without adapters cannot load a model that has some.
   */
  async #adaptersFor(inst: Instance, backend: InferenceBackend): Promise<AdapterScale[]> {
    const own = inst.resolved.adapters ?? [];
    if (backend.adapters === 'load') return own.map((a) => ({ path: a.path, scale: 1 }));
    if (backend.adapters !== 'request') {
      if (own.length === 0) return [];
      throw Errors.badRequest(`"${inst.resolved.name}" has LoRA adapters, and ${backend.name}, which runs it, takes none`, { param: 'model' });
    }
    const siblings = (await this.#o.storedModels?.().catch(() => [])) ?? [];
    const all = new Map<string, ModelAdapter>();
    for (const m of [inst.resolved, ...siblings.filter((m) => sameBase(m, inst.resolved))]) for (const a of m.adapters ?? []) all.set(a.path, a);
    return [...all.values()].map((a) => ({ path: a.path, scale: 0 }));
  }

  #create(model: ResolvedModel, options: AcquireOptions): Instance {
    const inst = new Instance(model, options.keepAliveMs ?? this.#o.keepAliveMs);
    inst.numGpu = options.numGpu;
    inst.parallel = options.parallel ?? this.#o.parallel;
    inst.cache = cacheOptions(options.kvCacheType ?? this.#o.kvCacheType, options.flashAttention ?? this.#o.flashAttention);
    inst.speculation = options.speculation;
    this.#instances.set(model.name, inst);
    const contextLength = options.contextLength ?? this.#o.contextLength;
    inst.contextAsked = contextLength;
    this.#loadChain = this.#loadChain.then(() => this.#load(inst, contextLength));
    return inst;
  }

  async #load(inst: Instance, contextLength: number): Promise<void> {
    try {
      if (inst.gone) return;
      // Inside the try: a failure here reaches the waiting requests as the load's error.
      await this.#checkCacheType(inst);
      const loadOptions = {
        parallel: inst.parallel,
        threads: this.#o.threads,
        batchThreads: this.#o.batchThreads ?? this.#o.threads,
        ...(contextLength > 0 ? { contextLength } : {}),
        ...(this.#o.batchSize ? { batchSize: this.#o.batchSize } : {}),
        ...inst.cache,
        ...(inst.speculation ? { speculation: inst.speculation } : {}),
        onExit: (err: Error) => this.#crashed(inst, err),
      };
      // Decided at each load: a backend that became available (a binary built meanwhile) counts.
      const candidates = await this.#o.backends.candidates(inst.resolved);
      const crashed = this.#crashedEngines.get(inst.resolved.digest) ?? new Map<string, string>();
      for (const backend of candidates) {
        if (crashed.has(backend.name)) continue;
        const crash = await this.#loadOn(inst, backend, loadOptions, contextLength);
        if (!crash) return;
        crashed.set(backend.name, crash.signal);
        this.#crashedEngines.set(inst.resolved.digest, crashed);
        const next = candidates.find((b) => !crashed.has(b.name));
        this.#o.log.warn(
          { model: inst.resolved.name, engine: backend.name, signal: crash.signal, next: next?.name ?? null },
          next
            ? `engine ${backend.name} died of ${crash.signal} loading ${inst.resolved.name} twice; loading it on ${next.name}`
            : `engine ${backend.name} died of ${crash.signal} loading ${inst.resolved.name} twice; no other engine runs it`,
        );
        this.#o.observe?.({ type: 'engine-fallback', model: inst.resolved.name, engine: backend.name, signal: crash.signal, to: next?.name ?? null });
        if (inst.gone) return;
      }
      const why = [...crashed].map(([engine, signal]) => `${engine} died of ${signal}`).join(', ');
      throw Errors.engineCrashed(`model "${inst.resolved.name}" cannot be loaded on this machine: ${why} while loading it`);
    } catch (err) {
      this.#o.log.error({ err, model: inst.resolved.name }, 'model load failed');
      this.#forget(inst);
      for (const w of inst.waiters.splice(0)) w.reject(err);
    }
  }

  /**
   * Loads `inst` on `backend` (its memory estimate, room made for it), once more when the engine
   * dies of a signal: resolves with the second crash, or null once loaded (or no longer wanted).
   * Any other failure is thrown.
   */
  async #loadOn(inst: Instance, backend: InferenceBackend, baseOptions: LoadOptions, contextLength: number): Promise<EngineCrash | null> {
    const adapters = await this.#adaptersFor(inst, backend);
    for (let attempt = 1; ; attempt++) {
      const loadOptions = { ...(await this.#place(inst, backend, baseOptions)), ...(adapters.length > 0 ? { adapters } : {}) };
      if (inst.gone) return null;
      // What the plan puts on a GPU is not in the host's memory budget (as Ollama counts system memory).
      const estimate = (await backend.estimateMemory(inst.resolved, loadOptions)).totalBytes + (await draftBytes(inst, backend, loadOptions));
      inst.estimateBytes = Math.max(0, estimate - (loadOptions.offload?.vramBytes ?? 0));
      this.#checkLargerContext(inst, contextLength);
      await this.#makeRoom(inst);
      if (inst.gone) return null;
      const loadStarted = process.hrtime.bigint();
      let model: LoadedModel;
      try {
        model = await backend.load(inst.resolved, loadOptions);
      } catch (err) {
        const crash = isAppError(err) ? err.crash : null;
        if (!crash) throw err;
        this.#o.log.warn({ model: inst.resolved.name, engine: backend.name, signal: crash.signal, attempt }, 'engine died while loading the model');
        if (attempt >= 2 || inst.gone) return inst.gone ? null : crash;
        continue;
      }
      this.#o.observe?.({ type: 'loaded', model: inst.resolved.name, seconds: Number(process.hrtime.bigint() - loadStarted) / 1e9 });
      if (inst.gone) {
        await model.unload();
        this.#o.observe?.({ type: 'unloaded', model: inst.resolved.name });
        return null;
      }
      inst.model = model;
      inst.engine = backend.name;
      inst.offload = loadOptions.offload ?? null;
      this.#o.log.info(
        {
          model: inst.resolved.name,
          engine: backend.name,
          device: deviceOf(inst),
          gpuLayers: inst.offload?.gpuLayers,
          sizeBytes: model.sizeBytes,
          vramBytes: model.vramBytes,
        },
        'model placed',
      );
      this.#pump(inst);
      if (inst.idle) this.#scheduleExpiry(inst);
      return null;
    }
  }

  /**
   * A quantized KV cache the model's format says it cannot hold (a GGUF whose head width is no
   * multiple of the type's block) becomes `f16`, with a warning, as Ollama falls back.
   */
  async #checkCacheType(inst: Instance): Promise<void> {
    const type = inst.cache.kvCacheType;
    if (!type || type === 'f16' || inst.resolved.remote) return;
    const fits = await this.#o.backends
      .handler(inst.resolved.format)
      ?.kvCacheFits?.(inst.resolved, type)
      .catch(() => true);
    if (fits !== false) return;
    this.#o.log.warn({ model: inst.resolved.name, kvCacheType: type }, `the model's attention heads cannot hold a ${type} KV cache: loading it with f16`);
    inst.cache = { ...inst.cache, kvCacheType: 'f16' };
  }

  /**
   * The load's offload (plugins/engine/plan/offload.ts), for a backend that lists devices and a
   * format that says what an offload moves. Automatic placement that cannot put the whole model on
   * a device first unloads idle models holding memory on this backend's devices, least recently
   * used first, as Ollama does, then plans again; what still does not fit is split with the CPU.
   */
  async #place(inst: Instance, backend: InferenceBackend, options: LoadOptions): Promise<LoadOptions> {
    if (!backend.devices || inst.resolved.remote) return options;
    const handler = this.#o.backends.handler(inst.resolved.format);
    if (!handler?.offloadCosts) return options;
    let devices = await backend.devices();
    // No device (most CPU-only machines): the CPU, without reading the model's layer sizes.
    if (devices.length === 0) return { ...options, offload: ON_CPU };
    const costs = await handler.offloadCosts(inst.resolved, options);
    for (let first = true; ; first = false) {
      if (!first) devices = await backend.devices();
      const onDevice = (id: string, of: Instance[]) => of.filter((i) => i.engine === backend.name).reduce((sum, i) => sum + bytesOn(i.offload, id), 0);
      const others = [...this.#instances.values()].filter((i) => i !== inst && !i.gone && i.model);
      const rooms = devices.map((d) => ({ id: d.id, freeBytes: d.freeBytes, usedByLiaBytes: onDevice(d.id, others) }));
      const offload = planOffload(costs, rooms, { numGpu: inst.numGpu, capBytes: this.#o.gpuMemoryCapBytes, reserveBytes: this.#o.gpuReserveBytes ?? 0 });
      const whole = offload.gpuLayers >= costs.layers + 1;
      const automatic = inst.numGpu === undefined || inst.numGpu < 0;
      const victim = others
        .filter((i) => i.idle && i.engine === backend.name && devicesOf(i.offload).some((id) => devices.some((d) => d.id === id)))
        .sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (whole || !automatic || !victim) return { ...options, offload };
      this.#o.log.info(
        { model: victim.resolved.name, for: inst.resolved.name, device: victim.offload?.device },
        'unloading an idle model to make room on the GPU',
      );
      await this.#unload(victim);
      if (inst.gone) return options;
    }
  }

  /**
   * A context larger than the engine's default (a request's `num_ctx`, or one grown for a long
   * prompt) is loaded only if it fits the memory budget on its own; otherwise the request gets a
   * context error that names the budget, instead of a load that could exhaust the machine's memory.
   */
  #checkLargerContext(inst: Instance, contextLength: number): void {
    const normal = this.#o.contextLength;
    if (inst.resolved.remote || contextLength === 0 || (normal !== 0 && contextLength <= normal)) return;
    if (inst.estimateBytes <= this.#o.memoryBudgetBytes) return;
    const gb = (n: number) => `${(n / 1e9).toFixed(1)} GB`;
    throw Errors.contextLengthExceeded(
      `a context of ${contextLength} tokens per sequence needs about ${gb(inst.estimateBytes)} of memory, more than the engine's memory budget of ${gb(this.#o.memoryBudgetBytes)}; ` +
        "shorten the prompt, lower num_ctx, or raise the engine's memoryBudget setting (LIA_MEMORY_BUDGET) or lower numParallel",
    );
  }

  /** The slots of a loaded model: its own figure (a remote model's) or what it was loaded with. */
  #slots(inst: Instance): number {
    return inst.model?.slots ?? inst.parallel;
  }

  /**
   * Unloads idle models (least recently used first) until `inst` fits the count and memory limits.
   * Remote models (served by upstream engines) hold no local memory: they neither count nor wait.
   */
  async #makeRoom(inst: Instance): Promise<void> {
    if (inst.resolved.remote) return;
    for (;;) {
      const others = [...this.#instances.values()].filter((i) => i !== inst && !i.gone && !i.resolved.remote);
      // Like with like: the estimate (which counts the runner process too) unless the real size in host memory is larger.
      const used = others.reduce((sum, i) => sum + Math.max(i.estimateBytes, (i.model?.sizeBytes ?? 0) - (i.model?.vramBytes ?? 0)), 0);
      if (others.length < this.#o.maxLoadedModels && used + inst.estimateBytes <= this.#o.memoryBudgetBytes) return;
      if (others.length === 0) return;
      const victim = others.filter((i) => i.idle && i.model).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (victim) {
        this.#o.log.info({ model: victim.resolved.name, for: inst.resolved.name }, 'unloading an idle model to make room');
        await this.#unload(victim);
      } else {
        // Every other model is busy: wait until one is released or gone, then look again.
        await new Promise<void>((resolve) => this.#changed.push(resolve));
      }
      if (inst.gone) return;
    }
  }

  /** Wraps a slot already counted in `inst.active` into a lease. */
  #lease(inst: Instance, started: bigint, loaded: boolean): Lease {
    inst.lastUsed = Date.now();
    let released = false;
    return {
      model: inst.model as LoadedModel,
      engine: inst.engine,
      loadNs: loaded ? 0 : Number(process.hrtime.bigint() - started),
      release: () => {
        if (released) return;
        released = true;
        inst.active--;
        inst.lastUsed = Date.now();
        if (inst.gone) return;
        this.#pump(inst);
        if (inst.idle) {
          this.#scheduleExpiry(inst);
          this.#notifyChanged();
        }
      },
    };
  }

  /** Waits for a slot; resolves true when the instance died and the caller must start over. */
  #wait(inst: Instance, ask: number | undefined, signal: AbortSignal): Promise<boolean> {
    this.#queued++;
    return new Promise<boolean>((resolve, reject) => {
      const waiter: Waiter = {
        grant: (retry) => (done(), resolve(retry)),
        reject: (err) => (done(), reject(err)),
        ask,
      };
      const onAbort = () => {
        const i = inst.waiters.indexOf(waiter);
        if (i >= 0) inst.waiters.splice(i, 1);
        waiter.reject(signal.reason);
        // A waiter that held the queue for a reload may have left: the next ones may go now.
        this.#pump(inst);
        if (inst.idle && inst.model && !inst.gone) this.#scheduleExpiry(inst);
      };
      const done = () => {
        this.#queued--;
        signal.removeEventListener('abort', onAbort);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      inst.waiters.push(waiter);
    });
  }

  /**
   * Grants free slots to waiters, in arrival order. A waiter that wants a larger context than the
   * loaded one holds the queue until the model is idle, then starts over to load it again.
   */
  #pump(inst: Instance): void {
    while (inst.model && !inst.gone && inst.waiters.length > 0) {
      const head = inst.waiters[0] as Waiter;
      if (this.#tooSmall(inst, head.ask)) {
        if (inst.active === 0) (inst.waiters.shift() as Waiter).grant(true);
        return;
      }
      if (inst.active >= this.#slots(inst)) return;
      const w = inst.waiters.shift() as Waiter;
      // Count the slot before the waiter's continuation runs, so a new arrival cannot take it.
      inst.active++;
      this.#drain.record();
      w.grant(false);
    }
  }

  #scheduleExpiry(inst: Instance): void {
    this.#clearTimer(inst);
    const ms = inst.keepAliveMs;
    if (ms === Infinity) {
      inst.expiresAt = Date.now() + FOREVER_MS;
      return;
    }
    inst.expiresAt = Date.now() + ms;
    if (ms <= 0) {
      void this.#unload(inst);
      return;
    }
    inst.timer = setTimeout(() => void this.#unload(inst), Math.min(ms, 2 ** 31 - 1));
    inst.timer.unref();
  }

  #clearTimer(inst: Instance): void {
    if (inst.timer) clearTimeout(inst.timer);
    inst.timer = null;
  }

  #unload(inst: Instance): Promise<void> {
    if (inst.unloading) return inst.unloading;
    this.#forget(inst);
    inst.unloading = (async () => {
      try {
        if (inst.model) {
          await inst.model.unload();
          this.#o.observe?.({ type: 'unloaded', model: inst.resolved.name });
        }
        this.#o.log.info({ model: inst.resolved.name }, 'model unloaded');
      } catch (err) {
        this.#o.log.warn({ err, model: inst.resolved.name }, 'model unload failed');
      }
      this.#notifyChanged();
    })();
    return inst.unloading;
  }

  #crashed(inst: Instance, err: Error): void {
    this.#o.log.error({ model: inst.resolved.name, err: err.message }, 'model runner died; it will be loaded again on the next request');
    this.#o.observe?.({ type: 'crashed', model: inst.resolved.name });
    this.#forget(inst);
    // Requests waiting for this instance start over and load a fresh runner.
    for (const w of inst.waiters.splice(0)) w.grant(true);
    this.#notifyChanged();
  }

  /** Removes the instance from the table and wakes whoever waits for it to be gone. */
  #forget(inst: Instance): void {
    inst.gone = true;
    this.#clearTimer(inst);
    if (this.#instances.get(inst.resolved.name) === inst) this.#instances.delete(inst.resolved.name);
    for (const w of inst.goneWaiters.splice(0)) w();
  }

  #notifyChanged(): void {
    for (const w of this.#changed.splice(0)) w();
  }
}

/** Whether two models load the same: the same weights, projector and template (what a backend reads at load). */
function sameBase(a: ResolvedModel, b: ResolvedModel): boolean {
  return a.format === b.format && a.modelPath === b.modelPath && a.projectorPath === b.projectorPath && (a.template ?? '') === (b.template ?? '');
}

/**
 * Where a loaded model runs: the device the offload plan chose, `cpu`, or `gpu` when a backend
 * that plans by itself reports device memory.
 */
function deviceOf(i: Instance): string {
  const on = devicesOf(i.offload);
  if (on.length > 0) return on.join(',');
  return i.offload ? 'cpu' : (i.model?.vramBytes ?? 0) > 0 ? 'gpu' : 'cpu';
}

/** A load's speculation as `/api/ps` shows it (the options' names); nothing without one. */
function speculationShown(s: Speculation | undefined): Pick<LoadedModelInfo, 'draft_model' | 'draft_ngram' | 'draft_num_predict'> {
  if (!s) return {};
  return s.kind === 'draft' ? { draft_model: s.draft.name, draft_num_predict: s.maxDraft } : { draft_ngram: s.ngram, draft_num_predict: s.maxDraft };
}

/**
 * Host memory a draft model takes beside the model (its weights and a cache of the same context and
 * slots, as both engines load it), by the backend's own estimate less the engine process, which the
 * model's estimate already holds; 0 without one.
 */
async function draftBytes(inst: Instance, backend: InferenceBackend, options: LoadOptions): Promise<number> {
  const s = inst.speculation;
  if (s?.kind !== 'draft') return 0;
  const { speculation: _s, offload: _o, adapters: _a, ...plain } = options;
  const { projectorPath: _p, adapters: _d, ...rest } = inst.resolved;
  const draft: ResolvedModel = { ...rest, name: s.draft.name, modelPath: s.draft.path, sizeBytes: s.draft.sizeBytes };
  const estimate = await backend.estimateMemory(draft, plain);
  return Math.max(0, estimate.totalBytes - (estimate.processBytes ?? 0));
}

/**
 * The cache a load gets: a quantized KV cache needs flash attention, so with flash attention off
 * it is `f16`, as Ollama does; `/api/ps` shows the type loaded.
 */
function cacheOptions(kvCacheType: KvCacheType | undefined, flashAttention: boolean | undefined): Pick<LoadOptions, 'kvCacheType' | 'flashAttention'> {
  const type = flashAttention === false && kvCacheType !== undefined && kvCacheType !== 'f16' ? 'f16' : kvCacheType;
  return { ...(type !== undefined ? { kvCacheType: type } : {}), ...(flashAttention !== undefined ? { flashAttention } : {}) };
}
