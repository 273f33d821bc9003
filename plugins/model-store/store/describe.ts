/**
 * What a stored manifest means: format, details, template, system prompt, parameters, messages,
 * licence and capabilities, read from its layers and its config blob. The store knows no model
 * format itself: the `backends` hook names the handler whose media types the weight layers carry,
 * and that handler describes the weights. A model whose format no enabled backend serves is
 * described from its config blob (what its creator recorded), with no capabilities.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { Errors, isAppError } from 'lia/plugin';
import type { BackendRegistry, FormatHandler } from 'lia/engine';
import type { ModelCapability, ModelDetails, StoredMessage } from '../public.js';
import type { ModelFile } from 'lia/engine';
import type { BlobStore } from './blobs.js';
import { layerTitle } from './layout.js';
import { MediaTypes, TEXT_MEDIA_TYPES, type Layer, type StoredManifest } from './manifest.js';

/** What the store asks of the `backends` hook about formats (the lookups happen per request, so every backend is registered by then). */
export type Formats = Pick<BackendRegistry, 'handlers' | 'forMediaType'>;

/** Everything the APIs and the engine need to know about one model. */
export interface ModelView {
  stored: StoredManifest;
  format: string;
  /** The handler of the format; absent when no enabled backend serves it. */
  handler?: FormatHandler;
  details: ModelDetails;
  /** The weight layers: those of the handler's media types, else every layer that is not text. */
  weights: Layer[];
  template?: string;
  system?: string;
  parameters: Record<string, unknown>;
  messages: StoredMessage[];
  licenses: string[];
  capabilities: ModelCapability[];
  /** `model_info` of `/api/show`, as the handler gives it. */
  modelInfo: Record<string, unknown>;
  /** A speech model's voices (`/api/show` → `voices`), as the handler gives them. */
  voices?: string[];
}

/** The Ollama config blob (`ConfigV2`), the fields the store reads and writes. */
export interface ConfigBlob {
  model_format?: string;
  model_family?: string;
  model_families?: string[] | null;
  model_type?: string;
  file_type?: string;
  architecture?: string;
  os?: string;
  rootfs?: { type: string; diff_ids: string[] };
  [key: string]: unknown;
}

/** The weight layers of a manifest and the handler of their format, if an enabled backend has one. */
export function weightsOf(layers: Layer[], formats: Formats): { handler?: FormatHandler; weights: Layer[] } {
  for (const layer of layers) {
    const handler = formats.forMediaType(layer.mediaType);
    if (!handler) continue;
    const mine = layers.filter((l) => handler.mediaTypes.includes(l.mediaType));
    // A single-file format loads one blob: the last such layer, as Ollama takes it.
    return { handler, weights: handler.layout === 'file' ? mine.slice(-1) : mine.filter((l) => layerTitle(l) !== undefined) };
  }
  return { weights: layers.filter((l) => !TEXT_MEDIA_TYPES.includes(l.mediaType)) };
}

/** Builds {@link ModelView}s. */
export class Describer {
  readonly #blobs: BlobStore;
  readonly #formats: Formats;

  constructor(blobs: BlobStore, formats: Formats) {
    this.#blobs = blobs;
    this.#formats = formats;
  }

  /** A layer as a format handler sees it. */
  file(layer: Layer): ModelFile {
    const name = layerTitle(layer);
    return {
      mediaType: layer.mediaType,
      digest: layer.digest,
      size: layer.size,
      path: this.#blobs.path(layer.digest),
      ...(name !== undefined ? { name } : {}),
    };
  }

  async #text(layer: Layer | undefined): Promise<string | undefined> {
    if (!layer) return undefined;
    return readFile(this.#blobs.path(layer.digest), 'utf8').catch(() => undefined);
  }

  async #json<T>(layer: Layer | undefined, fallback: T): Promise<T> {
    const text = await this.#text(layer);
    if (text === undefined) return fallback;
    try {
      return JSON.parse(text) as T;
    } catch {
      return fallback;
    }
  }

  /** The config blob, or `{}` when it is missing or unreadable. */
  async config(stored: StoredManifest): Promise<ConfigBlob> {
    const cfg = await this.#json<ConfigBlob | null>(stored.manifest.config, null);
    return cfg && typeof cfg === 'object' ? cfg : {};
  }

  /** Details as the config blob records them. */
  #recorded(cfg: ConfigBlob, parent: string): ModelDetails {
    return {
      parent_model: parent,
      format: typeof cfg.model_format === 'string' ? cfg.model_format : '',
      family: cfg.model_family ?? '',
      families: Array.isArray(cfg.model_families) ? cfg.model_families : null,
      parameter_size: cfg.model_type ?? '',
      quantization_level: cfg.file_type ?? '',
    };
  }

  /**
   * Details for listing: from the config blob when it has them (cheap, and what Ollama does),
   * else from the weights.
   */
  async details(stored: StoredManifest): Promise<ModelDetails> {
    const cfg = await this.config(stored);
    const parent = stored.manifest.layers.find((l) => l.from)?.from ?? '';
    if (typeof cfg.model_format === 'string' && cfg.model_format) return this.#recorded(cfg, parent);
    return { ...(await this.view(stored)).details, parent_model: parent };
  }

  /**
   * Details of a model whose weights cannot be described (a missing blob, a header that fails to
   * parse): what its config blob records, and `broken` saying why, so that listing shows the
   * model (to be deleted or pulled again) instead of hiding it or failing.
   */
  async brokenDetails(stored: StoredManifest, err: unknown): Promise<ModelDetails & { broken: string }> {
    const parent = stored.manifest.layers.find((l) => l.from)?.from ?? '';
    const reason = isAppError(err) ? err.message : 'its weights cannot be read';
    return { ...this.#recorded(await this.config(stored), parent), broken: reason };
  }

  /** The full view of a model; `verbose` asks the handler for its full metadata. */
  async view(stored: StoredManifest, { verbose = false }: { verbose?: boolean } = {}): Promise<ModelView> {
    const layers = stored.manifest.layers;
    const byType = (t: string): Layer | undefined => [...layers].reverse().find((l) => l.mediaType === t);
    const [template, system, parameters, messages, licenses] = await Promise.all([
      this.#text(byType(MediaTypes.template) ?? byType(MediaTypes.prompt)),
      this.#text(byType(MediaTypes.system)),
      this.#json<Record<string, unknown>>(byType(MediaTypes.params), {}),
      this.#json<StoredMessage[]>(byType(MediaTypes.messages), []),
      Promise.all(layers.filter((l) => l.mediaType === MediaTypes.license).map((l) => this.#text(l))),
    ]);
    const base = {
      stored,
      template,
      system,
      parameters: parameters && typeof parameters === 'object' && !Array.isArray(parameters) ? parameters : {},
      messages: Array.isArray(messages) ? messages : [],
      licenses: licenses.filter((l): l is string => l !== undefined),
    };
    const parent = layers.find((l) => l.from)?.from ?? '';
    const { handler, weights } = weightsOf(layers, this.#formats);
    if (!handler) {
      const details = this.#recorded(await this.config(stored), parent);
      return { ...base, format: details.format, details, weights, capabilities: [], modelInfo: {} };
    }
    for (const w of weights) {
      if ((await this.#blobs.size(w.digest)) === null) {
        throw Errors.conflict(`the weights blob ${w.digest} is missing from the store; pull or create the model again`);
      }
    }
    const described = await handler.describe({ weights: weights.map((l) => this.file(l)), layers: layers.map((l) => this.file(l)), template, verbose });
    const details: ModelDetails = { parent_model: parent, format: handler.name, ...described.details };
    return {
      ...base,
      format: handler.name,
      handler,
      details,
      weights,
      capabilities: described.capabilities,
      modelInfo: described.modelInfo ?? {},
      ...(described.voices?.length ? { voices: described.voices } : {}),
    };
  }
}
