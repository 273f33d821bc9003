/**
 * Plugin "backend-upstream": serves models that run on upstream engines (vLLM, SGLang, TGI,
 * llama-server, Ollama, other LIA appliances) through every LIA surface. It contributes the remote
 * models to the catalog (`hooks.modelSources`) and registers the `upstream` backend, which the
 * engine loads them with like any model, so keys, scopes, the queue, metrics and observers apply
 * unchanged. See docs/scale-out.md.
 *
 * @module
 */
import { CliError, definePlugin } from 'lia/plugin';
import { upstreamBackend } from './backend.js';
import { checkOptions, Options } from './options.js';
import { Pool } from './pool.js';

export default definePlugin({
  name: 'backend-upstream',
  apiVersion: 2,
  dependencies: ['engine', 'model-store', 'openai-wire'],
  requires: ['openai-wire'],
  uses: ['models'],
  description: 'Remote models served by upstream engines (OpenAI- or Ollama-compatible), with replicas and health checks',
  options: Options,
  async setup(app, ctx) {
    const problems = checkOptions(ctx.options);
    if (problems.length > 0) throw configError(ctx.name, problems.join('; '));
    let pool: Pool;
    try {
      pool = new Pool(ctx.options, ctx.log); // reads each upstream's key and CA
    } catch (err) {
      throw configError(ctx.name, (err as Error).message);
    }
    ctx.hooks.extensions.get('modelSources').register(pool);
    ctx.hooks.extensions.get('backends').register(upstreamBackend(pool, ctx.log), ctx.name);
    app.addHook('onReady', async () => {
      await pool.start(ctx.hooks.extensions.maybe('models')); // the local models, to warn of remote ones they shadow
      ctx.log.info({ upstreams: pool.upstreams.map((u) => u.name), models: pool.models().length }, 'upstreams ready');
    });
    app.addHook('onClose', async () => pool.close());
  },
});

/**
 * A configuration that cannot run (an upstream without models, a key variable that is not set, a
 * key or CA file that cannot be read): `lia serve` prints it without a stack trace and exits 2,
 * as for core's configuration errors, instead of crashing with a plain Error.
 */
function configError(plugin: string, message: string): CliError {
  return new CliError(`plugins.${plugin}.options: ${message}`, 2);
}
