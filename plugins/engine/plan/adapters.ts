/**
 * The LoRA adapters a request runs with, decided once: the model's adapters (Modelfile
 * `ADAPTER`) at scale 1, or the scales the request's `lora` gives them (llama-server's field:
 * `[{id, scale}]`, `id` indexing the model's adapters, one left out is off). Then, once a loaded
 * model is leased, whether its engine can run them: an engine that applies adapters at load
 * (node-llama-cpp) serves only the scales it was loaded with, and says so with a 400.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { AdapterScale, LoadedModel, SamplingOptions } from '../public.js';
import type { ResolvedModel } from 'lia/model-store';

/** The adapters and scales of a request on `model` (`asked`: the name the client used); undefined when the model has none. */
export function planAdapters(model: ResolvedModel, asked: string, lora: SamplingOptions['lora']): AdapterScale[] | undefined {
  const adapters = model.adapters ?? [];
  if (lora) {
    const beyond = lora.find((l) => l.id >= adapters.length);
    if (beyond) {
      const has =
        adapters.length === 0
          ? 'has no LoRA adapters'
          : `has ${adapters.length} LoRA adapter${adapters.length === 1 ? '' : 's'} (ids 0 to ${adapters.length - 1})`;
      throw Errors.badRequest(`lora id ${beyond.id}: "${asked}" ${has}`, { param: 'lora' });
    }
  }
  if (adapters.length === 0) return undefined;
  return adapters.map((a, id) => ({ path: a.path, scale: lora ? (lora.findLast((l) => l.id === id)?.scale ?? 0) : 1 }));
}

/**
 * Checks that the leased model can run the planned adapters: per request where its engine can,
 * else only at the scales it was loaded with.
 */
export function adaptersServed(model: LoadedModel, planned: readonly AdapterScale[] | undefined, asked: string, engine: string): void {
  const held = model.adapters;
  if (!planned || held?.perRequest) return;
  const loaded = new Map((held?.loaded ?? []).map((a) => [a.path, a.scale]));
  if (planned.every((a) => (loaded.get(a.path) ?? 0) === a.scale)) return;
  throw Errors.badRequest(
    `"${asked}" runs on ${engine}, which applies LoRA adapters when it loads the model, at scale ${[...loaded.values()].join(', ') || 1}; ` +
      'per-request lora scales need an engine that switches adapters per request (llama-server)',
    { param: 'lora' },
  );
}
