/**
 * Plugin "backend-upstream": serves models that run on upstream engines (vLLM, SGLang, TGI,
 * llama-server, Ollama, other LIA appliances) through every LIA surface. It contributes the remote
 * models to the catalog (`hooks.modelSources`) and registers the `upstream` backend, which the
 * engine loads them with like any model, so keys, scopes, the queue, metrics and observers apply
 * unchanged. See docs/scale-out.md.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { upstreamBackend } from './backend.js';
import { checkOptions, Options } from './options.js';
import { Pool } from './pool.js';

export default definePlugin({
  name: 'backend-upstream',
  apiVersion: 1,
  description: 'Remote models served by upstream engines (OpenAI- or Ollama-compatible), with replicas and health checks',
  options: Options,
  async setup(app, ctx) {
    const problems = checkOptions(ctx.options);
    if (problems.length > 0) throw new Error(`plugins.${ctx.name}.options: ${problems.join('; ')}`);
    const pool = new Pool(ctx.options, ctx.log);
    ctx.hooks.modelSources.register(pool);
    ctx.hooks.backends.register(upstreamBackend(pool, ctx.log));
    app.addHook('onReady', async () => {
      await pool.start();
      ctx.log.info({ upstreams: pool.upstreams.map((u) => u.name), models: pool.models().length }, 'upstreams ready');
    });
    app.addHook('onClose', async () => pool.close());
  },
});
