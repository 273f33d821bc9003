/**
 * Creating a model from uploaded blobs (`files`) or from another model (`from`), with a
 * template, system prompt, parameters, licence and messages on top: Ollama's `/api/create`.
 * Weight blobs must have been uploaded with `POST /api/blobs/:digest` first.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { FormatHandler } from 'lia/engine';
import type { ModelDetails, StoredMessage } from '../public.js';
import type { ConfigBlob, Formats } from './describe.js';
import { relativePathProblem } from './layout.js';
import {
  CONFIG_MEDIA_TYPE,
  encodeManifest,
  MANIFEST_MEDIA_TYPE,
  MediaTypes,
  TEXT_MEDIA_TYPES,
  TITLE_ANNOTATION,
  type Layer,
  type Manifest,
} from './manifest.js';
import { displayName, type ModelName } from './names.js';
import { normalizeDigest } from './paths.js';
import type { ModelStoreService } from './store.js';

/** A validated create request. */
export interface CreateSpec {
  name: ModelName;
  /** An existing model to start from. */
  from?: string;
  /** Relative file name → `sha256:<hex>` of an uploaded blob. */
  files?: Record<string, string>;
  /** LoRA adapters (Modelfile `ADAPTER`): file name → `sha256:<hex>` of an uploaded blob, added to the base's. */
  adapters?: Record<string, string>;
  template?: string;
  system?: string;
  parameters?: Record<string, unknown>;
  license?: string[];
  messages?: StoredMessage[];
}

/** One progress line of the create stream. */
export interface CreateProgress {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

/**
 * The format of the files of a create, as the enabled backends' handlers recognise their names:
 * exactly one must take them. None, or a handler that finds them incomplete, is a 400.
 */
export function formatOfFiles(formats: Formats, names: string[]): FormatHandler {
  const handlers = formats.handlers();
  const claims = handlers.flatMap((handler) => {
    const verdict = handler.recognise(names);
    return verdict ? [{ handler, problem: verdict.problem }] : [];
  });
  const usable = claims.filter((c) => !c.problem);
  if (usable.length === 1) return usable[0]!.handler;
  if (usable.length > 1) {
    throw Errors.badRequest(`"files" fit more than one model format (${usable.map((c) => c.handler.name).join(', ')}); send the files of one model`, {
      param: 'files',
    });
  }
  if (claims[0]) throw Errors.badRequest(claims[0].problem!, { param: 'files' });
  if (handlers.length === 0) throw Errors.badRequest('no enabled inference backend serves a model format, so "files" cannot make a model', { param: 'files' });
  const wanted = handlers.map((h) => `${h.files} (${h.name})`).join(', or ');
  throw Errors.badRequest(`"files" must be ${wanted}`, { param: 'files' });
}

async function weightsFromFiles(
  store: ModelStoreService,
  files: Record<string, string>,
  progress: (p: CreateProgress) => void,
): Promise<{ layers: Layer[]; details: ModelDetails }> {
  const entries = Object.entries(files);
  if (entries.length === 0) throw Errors.badRequest('"files" is empty', { param: 'files' });
  const uploaded: Array<{ name: string; digest: string; size: number }> = [];
  for (const [name, rawDigest] of entries) {
    if (typeof rawDigest !== 'string') throw Errors.badRequest(`"files.${name}" must be a digest string`, { param: 'files' });
    const problem = relativePathProblem(name);
    if (problem) throw Errors.badRequest(`invalid file name in "files": ${problem}`, { param: 'files' });
    const digest = normalizeDigest(rawDigest);
    const size = await store.blobs.size(digest);
    if (size === null)
      throw Errors.badRequest(`blob ${digest} for "${name}" is not in the store; upload it with POST /api/blobs/${digest} first`, { param: 'files' });
    uploaded.push({ name, digest, size });
  }
  const handler = formatOfFiles(
    store.formats,
    uploaded.map((f) => f.name),
  );
  const mediaType = handler.mediaTypes[0]!;
  let layers: Layer[];
  let weights: Layer[];
  if (handler.layout === 'file') {
    // One blob, loaded as it is: the file name is not kept (as Ollama stores GGUF); a second file
    // may be the weights' vision projector, kept as a projector layer.
    layers = await fileLayers(store, handler, uploaded);
    weights = layers.filter((l) => l.mediaType === mediaType);
  } else {
    layers = uploaded.map((f) => ({ mediaType, digest: f.digest, size: f.size, annotations: { [TITLE_ANNOTATION]: f.name } }));
    weights = layers;
  }
  progress({ status: `parsing ${handler.name.toUpperCase()}` });
  const described = await handler.describe({
    weights: weights.map((l) => store.describer.file(l)),
    layers: layers.map((l) => store.describer.file(l)),
    verbose: false,
  });
  for (const l of layers) progress({ status: `using existing layer ${l.digest}` });
  return { layers, details: { parent_model: '', format: handler.name, ...described.details } };
}

/**
 * The layers of a `file`-layout create: the one weights file, and with two files, the weights and
 * the vision projector the handler recognises (exactly one of each; else a 400).
 */
async function fileLayers(store: ModelStoreService, handler: FormatHandler, uploaded: Array<{ name: string; digest: string; size: number }>): Promise<Layer[]> {
  const mediaType = handler.mediaTypes[0]!;
  if (uploaded.length === 1) return [{ mediaType, digest: uploaded[0]!.digest, size: uploaded[0]!.size }];
  const projector = handler.projector;
  if (uploaded.length !== 2 || !projector) throw Errors.badRequest(`a ${handler.name} model is created from exactly one file`, { param: 'files' });
  const kinds = await Promise.all(uploaded.map((f) => projector.is(store.describer.file({ mediaType, digest: f.digest, size: f.size }))));
  const w = uploaded.filter((_, i) => !kinds[i]);
  const p = uploaded.filter((_, i) => kinds[i]);
  if (w.length !== 1 || p.length !== 1) {
    throw Errors.badRequest(
      `two ${handler.name} files make a model only as its weights and a vision projector; ${p.length === 2 ? 'both are projectors' : 'neither is a projector'}`,
      { param: 'files' },
    );
  }
  return [
    { mediaType, digest: w[0]!.digest, size: w[0]!.size },
    { mediaType: projector.mediaType, digest: p[0]!.digest, size: p[0]!.size },
  ];
}

/**
 * Checks what can be checked before any progress is streamed (so those failures keep their
 * status): the base model exists, file names are safe, every blob was uploaded and one enabled
 * backend's format takes the files.
 */
export async function checkCreate(store: ModelStoreService, spec: CreateSpec): Promise<void> {
  if (!spec.from && !spec.files) throw Errors.badRequest("neither 'from' or 'files' was specified");
  if (spec.from && !spec.files) await store.get(spec.from, 'from');
  for (const [file, rawDigest] of Object.entries(spec.files ?? {})) {
    if (typeof rawDigest !== 'string') throw Errors.badRequest(`"files.${file}" must be a digest string`, { param: 'files' });
    const problem = relativePathProblem(file);
    if (problem) throw Errors.badRequest(`invalid file name in "files": ${problem}`, { param: 'files' });
    const digest = normalizeDigest(rawDigest);
    if ((await store.blobs.size(digest)) === null) {
      throw Errors.badRequest(`blob ${digest} for "${file}" is not in the store; upload it with POST /api/blobs/${digest} first`, { param: 'files' });
    }
  }
  if (spec.files && Object.keys(spec.files).length > 0) formatOfFiles(store.formats, Object.keys(spec.files));
  if (spec.adapters) await adapterLayers(store, spec, await baseWeights(store, spec));
  const draft = spec.parameters?.['draft_model'];
  if (draft !== undefined) await checkDraft(store, spec, draft);
}

/**
 * A Modelfile's `DRAFT` (the parameter `draft_model`): a stored model of the same format whose
 * vocabulary is the new model's, as its format's handler compares them (a 400 naming both models
 * otherwise). The engine checks again at load, for a draft named by a request or the config.
 */
async function checkDraft(store: ModelStoreService, spec: CreateSpec, draft: unknown): Promise<void> {
  if (typeof draft !== 'string' || draft.trim() === '') throw Errors.badRequest('"draft_model" must name a stored model', { param: 'parameters' });
  const name = displayName(spec.name);
  const stored = await store.get(draft, 'draft_model');
  const view = await store.describer.view(stored);
  const drafter = displayName(stored.name);
  const base = await baseWeights(store, spec);
  const handler = base.handler;
  if (!handler?.draftFits || !base.weights || view.handler?.name !== base.handler?.name || !view.weights[0]) {
    const why = `a draft model is a model of the same format, and a ${handler?.name ?? 'model of this'} format takes none`;
    throw Errors.badRequest(`"${drafter}" cannot draft for "${name}": ${why}`, { param: 'parameters' });
  }
  const problem = await handler.draftFits(store.describer.file(base.weights), store.describer.file(view.weights[0]));
  if (problem) throw Errors.badRequest(`"${drafter}" cannot draft for "${name}": their vocabularies differ (${problem})`, { param: 'parameters' });
}

/** The weights layer and the format handler of the model a create makes, before its adapters go on. */
async function baseWeights(store: ModelStoreService, spec: CreateSpec): Promise<{ handler: FormatHandler | undefined; weights: Layer | undefined }> {
  if (spec.files) {
    const uploaded = await Promise.all(
      Object.entries(spec.files).map(async ([name, d]) => ({ name, digest: normalizeDigest(d), size: (await store.blobs.size(normalizeDigest(d))) ?? 0 })),
    );
    const handler = formatOfFiles(
      store.formats,
      uploaded.map((f) => f.name),
    );
    if (handler.layout !== 'file') return { handler, weights: undefined };
    const layers = await fileLayers(store, handler, uploaded);
    return { handler, weights: layers.find((l) => l.mediaType === handler.mediaTypes[0]) };
  }
  const view = await store.describer.view(await store.get(spec.from!, 'from'));
  return { handler: view.handler, weights: view.weights[0] };
}

/**
 * The layers of a create's `adapters`, each checked against the weights by the format's handler
 * (an adapter for another architecture is a 400 naming both); a format without adapters is a 400.
 */
async function adapterLayers(
  store: ModelStoreService,
  spec: CreateSpec,
  base: { handler: FormatHandler | undefined; weights: Layer | undefined },
): Promise<Layer[]> {
  const entries = Object.entries(spec.adapters ?? {});
  if (entries.length === 0) return [];
  const adapter = base.handler?.adapter;
  if (!adapter || !base.weights) {
    throw Errors.badRequest(`a ${base.handler?.name ?? 'model of this'} format takes no LoRA adapters`, { param: 'adapters' });
  }
  const layers: Layer[] = [];
  for (const [name, rawDigest] of entries) {
    if (typeof rawDigest !== 'string') throw Errors.badRequest(`"adapters.${name}" must be a digest string`, { param: 'adapters' });
    const problem = relativePathProblem(name);
    if (problem) throw Errors.badRequest(`invalid file name in "adapters": ${problem}`, { param: 'adapters' });
    const digest = normalizeDigest(rawDigest);
    const size = await store.blobs.size(digest);
    if (size === null) {
      throw Errors.badRequest(`blob ${digest} for adapter "${name}" is not in the store; upload it with POST /api/blobs/${digest} first`, {
        param: 'adapters',
      });
    }
    const layer: Layer = { mediaType: adapter.mediaType, digest, size, annotations: { [TITLE_ANNOTATION]: name } };
    const misfit = await adapter.check(store.describer.file(layer), store.describer.file(base.weights));
    if (misfit) throw Errors.badRequest(`adapter "${name}": ${misfit}`, { param: 'adapters' });
    layers.push(layer);
  }
  return layers;
}

/** Creates (or replaces) the model `spec.name`, reporting progress; the manifest is written last. */
export async function createModel(store: ModelStoreService, spec: CreateSpec, progress: (p: CreateProgress) => void): Promise<void> {
  if (!spec.from && !spec.files) throw Errors.badRequest("neither 'from' or 'files' was specified");
  const pins: Array<() => void> = [];
  try {
    let layers: Layer[];
    let details: ModelDetails;
    let baseParams: Record<string, unknown> = {};
    if (spec.files) {
      ({ layers, details } = await weightsFromFiles(store, spec.files, progress));
      pins.push(store.blobs.pin(layers.map((l) => l.digest)));
    } else {
      const base = await store.get(spec.from!, 'from');
      pins.push(store.blobs.pin(base.manifest.layers.map((l) => l.digest)));
      const view = await store.describer.view(base);
      const parent = displayName(base.name);
      layers = base.manifest.layers.map((l) => (TEXT_MEDIA_TYPES.includes(l.mediaType) ? l : { ...l, from: l.from ?? parent }));
      details = { ...view.details, parent_model: parent };
      baseParams = view.parameters;
      for (const l of layers) progress({ status: `using existing layer ${l.digest}` });
    }

    if (spec.adapters) {
      const handler = store.formats.handlers().find((h) => h.name === details.format);
      const added = await adapterLayers(store, spec, { handler, weights: layers.find((l) => handler?.mediaTypes[0] === l.mediaType) });
      pins.push(store.blobs.pin(added.map((l) => l.digest)));
      for (const l of added) {
        if (layers.some((held) => held.digest === l.digest)) continue;
        progress({ status: `using existing layer ${l.digest}` });
        layers.push(l);
      }
    }

    const replace = async (mediaType: string, contents: Array<string | Buffer>): Promise<void> => {
      layers = layers.filter((l) => l.mediaType !== mediaType && !(mediaType === MediaTypes.template && l.mediaType === MediaTypes.prompt));
      for (const c of contents) {
        const blob = await store.blobs.put(c);
        pins.push(store.blobs.pin([blob.digest]));
        progress({ status: `${blob.created ? 'creating new' : 'using existing'} layer ${blob.digest}` });
        layers.push({ mediaType, digest: blob.digest, size: blob.size });
      }
    };
    if (spec.template !== undefined) await replace(MediaTypes.template, spec.template ? [spec.template] : []);
    if (spec.system !== undefined) await replace(MediaTypes.system, spec.system ? [spec.system] : []);
    if (spec.parameters !== undefined) {
      const merged = { ...baseParams, ...spec.parameters };
      await replace(MediaTypes.params, Object.keys(merged).length > 0 ? [JSON.stringify(merged)] : []);
    }
    if (spec.license !== undefined) await replace(MediaTypes.license, spec.license);
    if (spec.messages !== undefined) await replace(MediaTypes.messages, spec.messages.length > 0 ? [JSON.stringify(spec.messages)] : []);

    const config: ConfigBlob = {
      model_format: details.format,
      model_family: details.family,
      model_families: details.families,
      model_type: details.parameter_size,
      file_type: details.quantization_level,
      architecture: 'amd64',
      os: 'linux',
      rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) },
    };
    const configBlob = await store.blobs.put(JSON.stringify(config));
    pins.push(store.blobs.pin([configBlob.digest]));
    const manifest: Manifest = {
      schemaVersion: 2,
      mediaType: MANIFEST_MEDIA_TYPE,
      config: { mediaType: CONFIG_MEDIA_TYPE, digest: configBlob.digest, size: configBlob.size },
      layers,
    };
    progress({ status: 'writing manifest' });
    const previous = await store.find(spec.name);
    await store.writeManifest(spec.name, encodeManifest(manifest));
    // Replacing a model: the blobs only the old version used go (those of the new one are pinned).
    if (previous) await store.collectGarbage(previous);
  } finally {
    for (const unpin of pins) unpin();
  }
}
