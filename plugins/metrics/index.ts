/**
 * Plugin "metrics": serves `GET /metrics` in Prometheus's text format (scope `system:read`): HTTP
 * requests by route pattern, per-model inference figures (time to first token, inter-token
 * latency, tokens, queue, slots, loads, crashes, memory), the GPUs' last reading and the process's
 * own figures. It observes through `hooks.requestObservers` and `hooks.inferenceObservers`, and
 * reads the engine's activity and the GPU monitor when scraped. See docs/metrics.md.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { Series } from './series.js';

export default definePlugin({
  name: 'metrics',
  apiVersion: 1,
  description: 'Prometheus metrics at GET /metrics: HTTP, per-model inference, GPU and process series',
  async setup(app, ctx) {
    const { hooks } = ctx;
    const series = new Series({ inference: () => hooks.inference.maybe(), gpu: () => hooks.gpuMonitor.maybe() });
    hooks.requestObservers.register({ name: ctx.name, onResponse: (r) => series.onResponse(r) });
    hooks.inferenceObservers.register({ name: ctx.name, onEvent: (e) => series.onEvent(e) });

    // Scrapes that arrive while a rendering is under way share it: the text is at most that one
    // rendering old, and N concurrent scrapers cost one collection, not N (bench/ops/run.ts).
    let rendering: Promise<string> | null = null;
    const render = (): Promise<string> => (rendering ??= series.registry.metrics().finally(() => (rendering = null)));
    app.get('/metrics', { config: { scope: 'system:read' } }, async (_request, reply) => {
      const text = await render();
      return reply.header('Content-Type', series.registry.contentType).header('Cache-Control', 'no-store').send(text);
    });
  },
});
