/**
 * What a stored manifest means: format, details, template, system prompt, parameters, messages,
 * licence and capabilities, read from its layers and its config blob. GGUF headers are parsed
 * once per blob and cached.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { Errors, type ModelCapability, type ModelDetails, type StoredMessage } from '../../../core/index.js';
import type { BlobStore } from './blobs.js';
import { readGguf, type GgufSummary } from './gguf.js';
import { MediaTypes, type Layer, type StoredManifest } from './manifest.js';
import { onnxDetails, onnxFiles } from './onnx.js';

/** Everything the APIs and the engine need to know about one model. */
export interface ModelView {
  stored: StoredManifest;
  format: string;
  details: ModelDetails;
  /** The weight layers (GGUF model layer, or the ONNX file layers). */
  weights: Layer[];
  template?: string;
  system?: string;
  parameters: Record<string, unknown>;
  messages: StoredMessage[];
  licenses: string[];
  capabilities: ModelCapability[];
  gguf?: GgufSummary;
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

/** Builds and caches {@link ModelView}s. */
export class Describer {
  readonly #blobs: BlobStore;
  readonly #gguf = new Map<string, Promise<GgufSummary>>();

  constructor(blobs: BlobStore) {
    this.#blobs = blobs;
  }

  /** The GGUF summary of a model blob, cached by digest (blobs never change). */
  gguf(digest: string): Promise<GgufSummary> {
    let p = this.#gguf.get(digest);
    if (!p) {
      p = this.#blobs.size(digest).then((size) => {
        if (size === null) throw Errors.conflict(`the weights blob ${digest} is missing from the store; pull or create the model again`);
        return readGguf(this.#blobs.path(digest));
      });
      p.catch(() => this.#gguf.delete(digest));
      this.#gguf.set(digest, p);
    }
    return p;
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

  /**
   * Details for listing: from the config blob when it has them (cheap, and what Ollama does),
   * else from the weights.
   */
  async details(stored: StoredManifest): Promise<ModelDetails> {
    const cfg = await this.config(stored);
    const parent = stored.manifest.layers.find((l) => l.from)?.from ?? '';
    if (typeof cfg.model_format === 'string' && cfg.model_format) {
      return {
        parent_model: parent,
        format: cfg.model_format,
        family: cfg.model_family ?? '',
        families: Array.isArray(cfg.model_families) ? cfg.model_families : null,
        parameter_size: cfg.model_type ?? '',
        quantization_level: cfg.file_type ?? '',
      };
    }
    return { ...(await this.view(stored)).details, parent_model: parent };
  }

  /** The full view of a model. */
  async view(stored: StoredManifest): Promise<ModelView> {
    const layers = stored.manifest.layers;
    const byType = (t: string): Layer | undefined => [...layers].reverse().find((l) => l.mediaType === t);
    const modelLayer = byType(MediaTypes.model);
    const files = onnxFiles(layers);
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
    if (!modelLayer && files.length > 0) {
      const details = { ...(await onnxDetails(files, (d) => this.#blobs.path(d))), parent_model: parent };
      return { ...base, format: 'onnx', details, weights: files, capabilities: ['embedding'] };
    }
    if (!modelLayer) {
      const details: ModelDetails = { parent_model: parent, format: '', family: '', families: null, parameter_size: '', quantization_level: '' };
      return { ...base, format: '', details, weights: [], capabilities: [] };
    }
    const gguf = await this.gguf(modelLayer.digest);
    const capabilities: ModelCapability[] = [gguf.pooling ? 'embedding' : 'completion'];
    const goTemplate = template ?? '';
    if (goTemplate.includes('.Tools') || /\btools\b/.test(gguf.chatTemplate ?? '')) capabilities.push('tools');
    if (goTemplate.includes('.Suffix')) capabilities.push('insert');
    if (layers.some((l) => l.mediaType === MediaTypes.projector)) capabilities.push('vision');
    return { ...base, format: 'gguf', details: { ...gguf.details, parent_model: parent }, weights: [modelLayer], capabilities, gguf };
  }
}
