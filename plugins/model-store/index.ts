/**
 * The model store plugin: owns the models on disk (Ollama's layout under `LIA_MODELS`), provides
 * the `models` hook the engine resolves names with, and serves the model routes: list, show,
 * copy, delete, blob upload, create, pull and push, plus the OpenAI model listing.
 *
 * @module
 */
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { definePlugin, Registry, type Hooks } from 'lia/plugin';
import type { Formats } from './store/describe.js';
import type { ModelSource } from './contracts.js';
import { RegistryClient } from './registry/client.js';
import { Puller } from './registry/pull.js';
import { Pusher } from './registry/push.js';
import { registerBlobRoutes } from './routes/blobs.js';
import { registerCreateRoute } from './routes/create.js';
import { registerModelRoutes } from './routes/models.js';
import { registerRegistryRoutes } from './routes/registry.js';
import { ModelStoreService } from './store/store.js';

const Options = Type.Object(
  {
    /** The models folder (Ollama layout). Defaults to `<data dir>/models`. */
    modelsDir: Type.Optional(Type.String({ minLength: 1 })),
    /** A PEM file of extra CAs trusted for HTTPS registries (with the system ones). Defaults to none. */
    registryCa: Type.Optional(Type.String({ minLength: 1 })),
    /** Time limit for connecting to a registry and for its answer to start, and for a stalled download. Defaults to 30 s. */
    registryTimeoutMs: Type.Integer({ minimum: 100, default: 30_000 }),
    /** Smallest part of a parallel ranged download. Defaults to 100 MiB (Ollama's figure). */
    downloadPartMinBytes: Type.Integer({ minimum: 1, default: 100 * 1024 * 1024 }),
    /** Largest number of parts downloaded at once per blob. Defaults to 16 (Ollama's figure). */
    downloadParts: Type.Integer({ minimum: 1, maximum: 64, default: 16 }),
    /** Retries of one download part before the pull fails. Defaults to 6. */
    downloadRetries: Type.Integer({ minimum: 0, maximum: 100, default: 6 }),
    /**
     * Follow a public registry's redirects and token realm to private addresses too (a registry
     * whose blob storage is on the LAN). Defaults to false: only a registry that is itself on a
     * private or loopback address may send the appliance there (docs/security.md).
     */
    registryPrivateTargets: Type.Boolean({ default: false }),
  },
  { additionalProperties: false },
);

/** The `model-store` plugin: provides the `models` hook and the model routes. */
export default definePlugin({
  name: 'model-store',
  apiVersion: 2,
  provides: ['models', 'modelSources'],
  uses: ['backends'],
  description: 'Models on disk (Ollama layout), pull/push from OCI registries, create, show, copy, delete',
  options: Options,
  env: {
    LIA_MODELS: 'modelsDir',
    LIA_REGISTRY_CA: 'registryCa',
    LIA_REGISTRY_TIMEOUT_MS: 'registryTimeoutMs',
  },
  commands: async () => (await import('./cli/commands.js')).commands,
  async setup(app, ctx) {
    const sources = new Registry<ModelSource>('model source');
    ctx.hooks.extensions.provide('modelSources', sources, ctx.name);
    const root = ctx.options.modelsDir ?? path.join(ctx.config.dataDir, 'models');
    const store = new ModelStoreService(root, formatsOf(ctx.hooks), () => sources.list());
    await store.init();
    ctx.hooks.extensions.provide('models', store, ctx.name);

    const client = new RegistryClient({
      timeoutMs: ctx.options.registryTimeoutMs,
      caFile: ctx.options.registryCa,
      allowPrivateTargets: ctx.options.registryPrivateTargets,
    });
    const puller = new Puller(store, client, {
      partMinBytes: ctx.options.downloadPartMinBytes,
      maxParts: ctx.options.downloadParts,
      retries: ctx.options.downloadRetries,
      log: ctx.log,
    });
    const pusher = new Pusher(store, client);
    app.addHook('onClose', async () => {
      await puller.close();
      client.close();
    });

    registerModelRoutes(app, store);
    registerCreateRoute(app, store);
    registerRegistryRoutes(app, store, puller, pusher);
    await registerBlobRoutes(app, store);
    ctx.log.debug({ root }, 'model store ready');
  },
});

/**
 * The formats of the engine's `backends` hook, looked up on each request (the engine may be set up
 * after the store, or be disabled: then no format is known).
 */
function formatsOf(hooks: Hooks): Formats {
  return {
    handlers: () => hooks.extensions.maybe('backends')?.handlers() ?? [],
    forMediaType: (mediaType) => hooks.extensions.maybe('backends')?.forMediaType(mediaType),
  };
}
