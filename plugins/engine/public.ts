/**
 * `lia/engine`: the public module of the `engine` plugin. It holds the two contracts the engine is
 * the consumer or the provider of, as a Fastify plugin declares its own decorators:
 *
 * - the inference service (`inference`): the one inference path the API plugins call
 *   ({@link InferenceService}, its requests and answers);
 * - the inference backend contract (`backends`): what a backend implements
 *   ({@link InferenceBackend}, {@link LoadedModel}, {@link FormatHandler} and the shapes they
 *   take and yield) and the {@link BackendRegistry} it registers in. The engine owns the registry:
 *   a backend plugin lists `engine` in `dependencies` (a third-party one is set up after the
 *   built-in plugins anyway) and calls `ctx.hooks.extensions.get('backends').register(backend,
 *   ctx.name)`.
 *
 * It follows the plugin API version of `lia/plugin` (`PLUGIN_API_VERSION`): within one
 * major, only additions; `etc/lia-engine.api.md` records the surface.
 *
 * @module
 */
import type { BackendRegistry } from './backend-registry.js';
import type { InferenceService } from './contracts/inference.js';

export type * from './contracts/backend.js';
export type * from './contracts/inference.js';
export type { BackendRegistry, ModelToRun } from './backend-registry.js';

declare module 'lia/plugin' {
  interface CustomHooks {
    /** The native inference service (the `engine` plugin; a 503 while none is provided). */
    inference: InferenceService;
    /** Inference backends and the model formats they serve (the `engine` plugin's registry). */
    backends: BackendRegistry;
  }
}
