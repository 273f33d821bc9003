/**
 * The Prometheus series of the appliance, in one prom-client registry per appliance. Counters and
 * histograms are fed by the request and inference observers; gauges (queue, slots, loaded models,
 * GPUs) are read from the engine and the GPU monitor when Prometheus scrapes. Every label is
 * bounded: a route pattern, a method, a status, a model name, a GPU index and name, an API key's
 * name (the principal's id, never its secret). See docs/metrics.md for the list.
 *
 * @module
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { InferenceEvent, InferenceObserver, RequestObserver, RequestRecord } from 'lia/plugin/contracts';
import type { GpuMonitor } from 'lia/host-gpu';
import type { InferenceService } from 'lia/engine';

/** Buckets in seconds: HTTP answers run from a cached JSON (ms) to a long stream (minutes). */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Time to first token includes the queue and a cold load. */
const TTFT_BUCKETS = [0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60];
/** Decode steps: from a small model on a GPU (ms) to a large one on a CPU (a second). */
const TOKEN_GAP_BUCKETS = [0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28];
const LOAD_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** How long a rendering serves further scrapes while nothing but scrapes happened (ms). */
export const REUSE_MS = 1000;

/**
 * The rendered text, shared: scrapes that arrive during a rendering wait for it, and scrapes
 * within {@link REUSE_MS} of it get the same text as long as no request other than a scrape and no
 * inference event was observed since. A scrape thus never misses a request or a token that came
 * before it; what it may miss is the other scrapes of the last second and up to a second of the
 * process and GPU gauges. Rendering costs about five `/health` answers (prom-client walks every
 * series and reads `/proc`), so fifty scrapers at once would otherwise cost fifty renderings.
 */
export class Rendering {
  #pending: Promise<string> | null = null;
  #last: { text: string; at: number } | null = null;
  #dirty = true;

  readonly #render: () => Promise<string>;

  constructor(render: () => Promise<string>) {
    this.#render = render;
  }

  /** Something a scrape must see happened. */
  changed(): void {
    this.#dirty = true;
  }

  get(): Promise<string> {
    if (this.#last && !this.#dirty && Date.now() - this.#last.at < REUSE_MS) return Promise.resolve(this.#last.text);
    return (this.#pending ??= this.#fresh());
  }

  async #fresh(): Promise<string> {
    this.#dirty = false;
    try {
      const text = await this.#render();
      this.#last = { text, at: Date.now() };
      return text;
    } finally {
      this.#pending = null;
    }
  }
}

export interface Sources {
  inference: () => InferenceService | undefined;
  gpu: () => GpuMonitor | undefined;
}

export class Series {
  readonly registry = new Registry();
  readonly #httpRequests: Counter<'method' | 'route' | 'status'>;
  readonly #httpDuration: Histogram<'method' | 'route'>;
  readonly #requests: Counter<'model' | 'kind'>;
  readonly #ttft: Histogram<'model'>;
  readonly #tokenGap: Histogram<'model'>;
  readonly #promptTokens: Counter<'model'>;
  readonly #generatedTokens: Counter<'model'>;
  readonly #draftTokens: Counter<'model'>;
  readonly #draftAccepted: Counter<'model'>;
  readonly #loads: Counter<'model'>;
  readonly #loadDuration: Histogram<'model'>;
  readonly #unloads: Counter<'model'>;
  readonly #crashes: Counter<'model'>;
  readonly #fallbacks: Counter<'model' | 'engine' | 'signal'>;
  readonly #keyRequests: Counter<'key'>;
  readonly #keyPromptTokens: Counter<'key'>;
  readonly #keyGeneratedTokens: Counter<'key'>;

  constructor(sources: Sources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    // This gauge is measured at each scrape by waiting for the next turn of the event loop, so
    // under load every scrape waits behind the queued work; the lag percentiles that stay
    // (nodejs_eventloop_lag_p50/p90/p99_seconds, sampled continuously) say the same without it.
    this.registry.removeSingleMetric('nodejs_eventloop_lag_seconds');
    this.#httpRequests = new Counter({
      name: 'lia_http_requests_total',
      help: 'HTTP requests answered, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    this.#httpDuration = new Histogram({
      name: 'lia_http_request_duration_seconds',
      help: "Time from a request's arrival to the last byte of its answer, by method and route pattern.",
      labelNames: ['method', 'route'],
      buckets: HTTP_BUCKETS,
      registers,
    });
    this.#requests = new Counter({
      name: 'lia_model_requests_total',
      help: 'Inference requests that reached a model, by model and kind (generate, chat, embed, rerank, transcribe, speech).',
      labelNames: ['model', 'kind'],
      registers,
    });
    this.#ttft = new Histogram({
      name: 'lia_model_time_to_first_token_seconds',
      help: "Time from a request's arrival at the engine (queue and load included) to its first token.",
      labelNames: ['model'],
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.#tokenGap = new Histogram({
      name: 'lia_model_inter_token_latency_seconds',
      help: 'Time between two consecutive generated tokens of one request.',
      labelNames: ['model'],
      buckets: TOKEN_GAP_BUCKETS,
      registers,
    });
    this.#promptTokens = new Counter({ name: 'lia_model_prompt_tokens_total', help: 'Prompt tokens evaluated.', labelNames: ['model'], registers });
    this.#generatedTokens = new Counter({ name: 'lia_model_generated_tokens_total', help: 'Tokens generated.', labelNames: ['model'], registers });
    this.#draftTokens = new Counter({
      name: 'lia_model_draft_tokens_total',
      help: 'Tokens drafted by speculative decoding (a draft model or n-gram lookup) for the model to check.',
      labelNames: ['model'],
      registers,
    });
    this.#draftAccepted = new Counter({
      name: 'lia_model_draft_accepted_tokens_total',
      help: 'Drafted tokens the model accepted (each one a decode step saved).',
      labelNames: ['model'],
      registers,
    });
    this.#loads = new Counter({ name: 'lia_model_loads_total', help: 'Model loads completed.', labelNames: ['model'], registers });
    this.#loadDuration = new Histogram({
      name: 'lia_model_load_duration_seconds',
      help: 'Time the backend took to load a model.',
      labelNames: ['model'],
      buckets: LOAD_BUCKETS,
      registers,
    });
    this.#unloads = new Counter({ name: 'lia_model_unloads_total', help: 'Model unloads.', labelNames: ['model'], registers });
    this.#crashes = new Counter({ name: 'lia_model_runner_crashes_total', help: 'Model runner processes that died.', labelNames: ['model'], registers });
    this.#fallbacks = new Counter({
      name: 'lia_engine_fallbacks_total',
      help: 'Loads given up on an engine that died of a signal twice loading the model, by model, engine and signal.',
      labelNames: ['model', 'engine', 'signal'],
      registers,
    });
    // Per API key, as /system/usage counts: inference requests and their tokens, labelled with the
    // principal's id (a key's name, `master`); requests made without a principal get no series.
    this.#keyRequests = new Counter({
      name: 'lia_key_requests_total',
      help: 'Inference requests that reached a model, by API key name.',
      labelNames: ['key'],
      registers,
    });
    this.#keyPromptTokens = new Counter({
      name: 'lia_key_prompt_tokens_total',
      help: 'Prompt tokens evaluated, by API key name.',
      labelNames: ['key'],
      registers,
    });
    this.#keyGeneratedTokens = new Counter({
      name: 'lia_key_generated_tokens_total',
      help: 'Tokens generated, by API key name.',
      labelNames: ['key'],
      registers,
    });
    this.#modelGauges(sources.inference, registers);
    this.#gpuGauges(sources.gpu, registers);
  }

  /** The rendered text `GET /metrics` serves. */
  readonly text = new Rendering(() => this.registry.metrics());

  /**
   * The observers to register: each observation feeds the series and marks the rendered text
   * stale (a scrape of `/metrics` itself excepted).
   */
  observers(name: string): { request: RequestObserver; inference: InferenceObserver } {
    return {
      request: {
        name,
        onResponse: (r) => {
          this.onResponse(r);
          if (r.route !== '/metrics') this.text.changed();
        },
      },
      inference: {
        name,
        onEvent: (e) => {
          this.onEvent(e);
          this.text.changed();
        },
      },
    };
  }

  onResponse(r: RequestRecord): void {
    const status = String(r.statusCode);
    this.#httpRequests.inc({ method: r.method, route: r.route, status });
    this.#httpDuration.observe({ method: r.method, route: r.route }, r.seconds);
  }

  onEvent(e: InferenceEvent): void {
    const model = { model: e.model };
    switch (e.type) {
      case 'request':
        if (e.principal) this.#keyRequests.inc({ key: e.principal });
        return this.#requests.inc({ model: e.model, kind: e.kind });
      case 'first-token':
        return this.#ttft.observe(model, e.seconds);
      case 'token-gap':
        return this.#tokenGap.observe(model, e.seconds);
      case 'finished':
        if (e.principal) {
          this.#keyPromptTokens.inc({ key: e.principal }, e.promptTokens);
          this.#keyGeneratedTokens.inc({ key: e.principal }, e.completionTokens);
        }
        if (e.draftTokens !== undefined) {
          this.#draftTokens.inc(model, e.draftTokens);
          this.#draftAccepted.inc(model, e.draftAcceptedTokens ?? 0);
        }
        this.#promptTokens.inc(model, e.promptTokens);
        return this.#generatedTokens.inc(model, e.completionTokens);
      case 'loaded':
        this.#loads.inc(model);
        return this.#loadDuration.observe(model, e.seconds);
      case 'unloaded':
        return this.#unloads.inc(model);
      case 'crashed':
        return this.#crashes.inc(model);
      case 'engine-fallback':
        return this.#fallbacks.inc({ model: e.model, engine: e.engine, signal: e.signal });
    }
  }

  /** Queue, slots, loaded models and their memory, read at each scrape (models that left disappear). */
  #modelGauges(inference: Sources['inference'], registers: Registry[]): void {
    const activity = () => inference()?.activity?.() ?? [];
    new Gauge({
      name: 'lia_model_queue_depth',
      help: 'Requests waiting for a slot or for the model to load.',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const a of activity()) this.set({ model: a.model }, a.queued);
      },
    });
    new Gauge({
      name: 'lia_model_busy_slots',
      help: "Requests holding one of the model's parallel slots.",
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const a of activity()) this.set({ model: a.model }, a.active);
      },
    });
    new Gauge({
      name: 'lia_model_slots',
      help: 'Slots of a loaded model: requests it serves at once (num_parallel, else the engine numParallel).',
      labelNames: ['model'],
      registers,
      collect() {
        this.reset();
        for (const a of activity()) if (a.loaded && a.slots !== undefined) this.set({ model: a.model }, a.slots);
      },
    });
    new Gauge({
      name: 'lia_model_loaded',
      help: '1 for every loaded model, with the engine serving it and the device it runs on (cpu, or the GPU device).',
      labelNames: ['model', 'engine', 'device'],
      registers,
      collect() {
        this.reset();
        for (const a of activity()) if (a.loaded) this.set({ model: a.model, engine: a.engine, device: a.device }, 1);
      },
    });
    new Gauge({
      name: 'lia_model_memory_bytes',
      help: 'Memory a loaded model uses, in total and on the GPU (location="total"|"vram").',
      labelNames: ['model', 'location'],
      registers,
      collect() {
        this.reset();
        for (const a of activity()) {
          if (!a.loaded) continue;
          this.set({ model: a.model, location: 'total' }, a.sizeBytes);
          this.set({ model: a.model, location: 'vram' }, a.vramBytes);
        }
      },
    });
  }

  /** The GPU monitor's last reading (no probe runs for a scrape); nothing without a GPU. */
  #gpuGauges(gpu: Sources['gpu'], registers: Registry[]): void {
    const devices = () => {
      const latest = gpu()?.latest();
      return latest && !latest.stale ? latest.devices.map((d, i) => ({ d, labels: { gpu: String(d.index ?? i), name: d.name } })) : [];
    };
    const MB = 1024 * 1024;
    const gauge = (name: string, help: string, value: (d: ReturnType<typeof devices>[number]['d']) => number | null | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['gpu', 'name'],
        registers,
        collect() {
          this.reset();
          for (const { d, labels } of devices()) {
            const v = value(d);
            if (typeof v === 'number') this.set(labels, v);
          }
        },
      });
    gauge('lia_gpu_memory_used_bytes', 'GPU memory in use.', (d) => d.vram_used_mb * MB);
    gauge('lia_gpu_memory_total_bytes', 'GPU memory in all.', (d) => d.vram_total_mb * MB);
    gauge('lia_gpu_temperature_celsius', 'GPU temperature.', (d) => d.temp_c);
    gauge('lia_gpu_utilization_ratio', 'Share of time the GPU was busy (0 to 1).', (d) => (d.utilization_percent == null ? null : d.utilization_percent / 100));
  }
}
