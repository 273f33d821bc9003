/**
 * `lia/model-store`: the public module of the `model-store` plugin: what the engine and the APIs
 * may ask of the store ({@link ModelStore}, `hooks.extensions.get('models')`), what a stored model
 * resolves to ({@link ResolvedModel}, which a backend loads), and the model sources a plugin adds
 * remote models with ({@link ModelSource}, `hooks.extensions.get('modelSources')`; such a plugin
 * lists `model-store` in `dependencies`).
 *
 * Types only. It follows the plugin API version of `lia/plugin`: within one major, only
 * additions; `etc/lia-model-store.api.md` records the surface.
 *
 * @module
 */
import type { Registry } from 'lia/plugin';
import type { ModelSource, ModelStore } from './contracts.js';

export type * from './contracts.js';

declare module 'lia/plugin' {
  interface CustomHooks {
    /** The model store (the `model-store` plugin; a 503 while none is provided). */
    models: ModelStore;
    /** Models without local files (upstream engines) that the store lists and resolves beside its own. */
    modelSources: Registry<ModelSource>;
  }
}
