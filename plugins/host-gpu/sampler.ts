/**
 * The GPU sampler behind `svc-gpu-monitor`: picks a provider once (the forced vendor, else the
 * first registered provider whose `detect()` is true, else none), probes it every interval in the
 * background and keeps the last reading. `GET /system/gpu` only reads that cache, so a probe that
 * hangs or prints garbage can never hold a request: the answer is the last good devices with the
 * error, and with `stale: true` once the monitor is stopped or readings are too old.
 *
 * @module
 */
import type { GpuProvider } from 'lia/plugin';
import type { GpuDevice } from 'lia/plugin/contracts';

/** What `GET /system/gpu` returns. */
export interface GpuSnapshot {
  vendor: string;
  devices: GpuDevice[];
  /** Tool or file the figures came from; null without a GPU. */
  source: string | null;
  /** When the devices were last read successfully (ISO-8601), or null. */
  sampled_at: string | null;
  /** True when the monitor is stopped or the last good reading is older than three intervals. */
  stale: boolean;
  /** The last probe's failure, or null when it succeeded. */
  error: string | null;
}

/** Sampler settings (the plugin options `vendor`, `intervalMs`, `timeoutMs`). */
export interface SamplerOptions {
  /** `auto` or a provider name/vendor to force. */
  vendor: string;
  intervalMs: number;
  /** Per-probe deadline; a probe is also aborted when the monitor stops. */
  timeoutMs: number;
}

type NamedProvider = GpuProvider & { name: string };

/** How long `start()` waits for the first reading before letting the boot go on. */
export const FIRST_READING_WAIT_MS = 1000;

/** Background GPU sampling with a cached snapshot; see the module comment. */
export class GpuSampler {
  readonly #providers: () => readonly NamedProvider[];
  readonly #options: SamplerOptions;
  #provider: NamedProvider | null = null;
  #detected = false;
  #devices: GpuDevice[] = [];
  #source: string | null = null;
  #sampledAt: number | null = null;
  #error: string | null = null;
  #running = false;
  #timer: NodeJS.Timeout | null = null;
  #inflight: AbortController | null = null;
  /** Bumped by every start/stop, so a timer chain of an earlier run cannot continue. */
  #generation = 0;

  constructor(providers: () => readonly NamedProvider[], options: SamplerOptions) {
    this.#providers = providers;
    this.#options = options;
  }

  get running(): boolean {
    return this.#running;
  }

  /**
   * Detects the provider (first start only), takes one reading (waiting for it at most
   * {@link FIRST_READING_WAIT_MS}), then samples in the background.
   */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    const generation = ++this.#generation;
    if (!this.#detected) {
      this.#provider = await this.#detect();
      this.#detected = true;
    }
    // Boot waits for the first reading only briefly: a slow tool must not hold the other services.
    const first = this.sample();
    await Promise.race([first, new Promise((r) => setTimeout(r, FIRST_READING_WAIT_MS).unref())]);
    void first.then(() => this.#schedule(generation));
  }

  /** Stops sampling and aborts a probe in flight; the snapshot freezes and turns stale. */
  async stop(): Promise<void> {
    this.#running = false;
    this.#generation++;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    this.#inflight?.abort();
  }

  /** One reading now. Never throws: a failure is recorded in `error`. */
  async sample(): Promise<void> {
    const provider = this.#provider;
    if (!provider) {
      this.#devices = [];
      this.#source = null;
      this.#sampledAt = Date.now();
      this.#error = null;
      return;
    }
    const controller = new AbortController();
    this.#inflight = controller;
    // A backstop for providers that overrun their own deadline; reported as the same timeout, not
    // as an abort (on a loaded machine it can fire before the tool's own timer does).
    let overran = false;
    const deadline = setTimeout(() => {
      overran = true;
      controller.abort();
    }, this.#options.timeoutMs + 100);
    try {
      const report = await provider.probe(controller.signal);
      this.#devices = report.devices;
      this.#source = report.source ?? provider.name;
      this.#sampledAt = Date.now();
      this.#error = null;
    } catch (err) {
      this.#error = overran ? `${provider.name} did not answer within ${this.#options.timeoutMs} ms` : err instanceof Error ? err.message : String(err);
    } finally {
      clearTimeout(deadline);
      if (this.#inflight === controller) this.#inflight = null;
    }
  }

  snapshot(): GpuSnapshot {
    const age = this.#sampledAt === null ? Infinity : Date.now() - this.#sampledAt;
    return {
      vendor: this.#provider?.vendor ?? 'none',
      devices: this.#devices,
      source: this.#source,
      sampled_at: this.#sampledAt === null ? null : new Date(this.#sampledAt).toISOString(),
      stale: !this.#running || (this.#provider !== null && age > 3 * this.#options.intervalMs + this.#options.timeoutMs),
      error: this.#error,
    };
  }

  async #detect(): Promise<NamedProvider | null> {
    const providers = this.#providers();
    const forced = this.#options.vendor;
    if (forced === 'none') return null;
    if (forced !== 'auto') {
      const match = providers.find((p) => p.name === forced || p.vendor === forced);
      if (!match) throw new Error(`no GPU provider named "${forced}" is registered (have: ${providers.map((p) => p.name).join(', ') || 'none'})`);
      return match;
    }
    for (const provider of providers) {
      try {
        if (await provider.detect()) return provider;
      } catch {
        // a provider whose detection fails is simply not present
      }
    }
    return null;
  }

  #schedule(generation: number): void {
    if (!this.#running || generation !== this.#generation) return;
    this.#timer = setTimeout(() => {
      void this.sample().then(() => this.#schedule(generation));
    }, this.#options.intervalMs);
    this.#timer.unref();
  }
}
