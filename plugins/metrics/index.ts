/**
 * Plugin "metrics": serves `GET /metrics` in Prometheus's text format (scope `system:read`): HTTP
 * requests by route pattern, per-model inference figures (time to first token, inter-token
 * latency, tokens, queue, slots, loads, crashes, memory), inference requests and tokens per API
 * key (labelled with the key's name), the GPUs' last reading and the process's own figures. It
 * observes through `hooks.requestObservers` and `hooks.inferenceObservers`, and reads the engine's
 * activity and the GPU monitor when scraped. See docs/metrics.md.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { Series } from './series.js';

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
class Rendering {
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

export default definePlugin({
  name: 'metrics',
  apiVersion: 1,
  uses: ['inference', 'gpuMonitor'],
  description: 'Prometheus metrics at GET /metrics: HTTP, per-model and per-key inference, GPU and process series',
  async setup(app, ctx) {
    const { hooks } = ctx;
    const series = new Series({ inference: () => hooks.inference.maybe(), gpu: () => hooks.gpuMonitor.maybe() });
    const text = new Rendering(() => series.registry.metrics());
    hooks.requestObservers.register({
      name: ctx.name,
      onResponse: (r) => {
        series.onResponse(r);
        if (r.route !== '/metrics') text.changed();
      },
    });
    hooks.inferenceObservers.register({
      name: ctx.name,
      onEvent: (e) => {
        series.onEvent(e);
        text.changed();
      },
    });

    app.get('/metrics', { config: { scope: 'system:read' } }, async (_request, reply) => {
      const body = await text.get();
      return reply.header('Content-Type', series.registry.contentType).header('Cache-Control', 'no-store').send(body);
    });
  },
});
