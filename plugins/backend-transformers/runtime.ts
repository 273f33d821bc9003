/**
 * The one door to `@huggingface/transformers` (and through it onnxruntime-node). It is imported
 * on the first model load, not when the plugin is set up, so an appliance that never serves an
 * ONNX model does not pay for it at start, in time or memory (bench/results/2026-11-27-code-notes.md).
 *
 * On import the library's global environment is locked to local files: remote model loading
 * off, local loading on, no file or browser cache (the model store owns the files; the
 * library's default cache would write under `node_modules`).
 *
 * @module
 */
import type * as TransformersModule from '@huggingface/transformers';

/** The library's module namespace. */
export type Transformers = typeof TransformersModule;

let loading: Promise<Transformers> | undefined;

/** Imports the library once and configures it for offline use. */
export function transformers(): Promise<Transformers> {
  loading ??= import('@huggingface/transformers').then(
    (t) => {
      t.env.allowRemoteModels = false;
      t.env.allowLocalModels = true;
      t.env.useFSCache = false;
      t.env.useBrowserCache = false;
      t.env.useCustomCache = false;
      t.env.logLevel = t.LogLevel.ERROR;
      return t;
    },
    (err: unknown) => {
      loading = undefined;
      throw err;
    },
  );
  return loading;
}
