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

export default definePlugin({
  name: 'metrics',
  apiVersion: 1,
  uses: ['inference', 'gpuMonitor'],
  description: 'Prometheus metrics at GET /metrics: HTTP, per-model and per-key inference, GPU and process series',
  async setup(app, ctx) {
    const { hooks } = ctx;
    const series = new Series({ inference: () => hooks.inference.maybe(), gpu: () => hooks.gpuMonitor.maybe() });
    const observers = series.observers(ctx.name);
    hooks.requestObservers.register(observers.request);
    hooks.inferenceObservers.register(observers.inference);

    app.get('/metrics', { config: { scope: 'system:read' } }, async (_request, reply) => {
      const body = await series.text.get();
      return reply.header('Content-Type', series.registry.contentType).header('Cache-Control', 'no-store').send(body);
    });
  },
});
