/**
 * Image manifests (Docker schema 2, as Ollama and OCI registries use them): parsing with checks
 * and the walk over every manifest in the store.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { digestHex } from './paths.js';
import type { ModelName } from './names.js';

/** Media type of the manifest itself. */
export const MANIFEST_MEDIA_TYPE = 'application/vnd.docker.distribution.manifest.v2+json';
/** OCI image manifest media type, accepted on pull. */
export const OCI_MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';
/** Media type of the config blob. */
export const CONFIG_MEDIA_TYPE = 'application/vnd.docker.container.image.v1+json';

/**
 * Ollama's media types of the layers the store itself reads: the text around the weights. The
 * weights' own layer types belong to the format handlers of the inference backends
 * (`FormatHandler.mediaTypes`); any other layer is kept and carried as it is.
 */
export const MediaTypes = {
  template: 'application/vnd.ollama.image.template',
  prompt: 'application/vnd.ollama.image.prompt',
  system: 'application/vnd.ollama.image.system',
  params: 'application/vnd.ollama.image.params',
  messages: 'application/vnd.ollama.image.messages',
  license: 'application/vnd.ollama.image.license',
} as const;

/**
 * Ollama's layer of a vision projector (a CLIP-style GGUF beside the weights). Not a text layer:
 * a create with `from` keeps it.
 */
export const PROJECTOR_MEDIA_TYPE = 'application/vnd.ollama.image.projector';

/**
 * Ollama's layer of a LoRA adapter (a GGUF adapter file for the weights). Not a text layer: a
 * create with `from` keeps it.
 */
export const ADAPTER_MEDIA_TYPE = 'application/vnd.ollama.image.adapter';

/** The text layers, which a create with `from` replaces instead of inheriting. */
export const TEXT_MEDIA_TYPES: readonly string[] = Object.values(MediaTypes);

/** The OCI annotation that carries a file layer's name. */
export const TITLE_ANNOTATION = 'org.opencontainers.image.title';

/** A descriptor of the config blob or a layer. */
export interface Layer {
  mediaType: string;
  digest: string;
  size: number;
  /** Source model of the layer (becomes `parent_model`). */
  from?: string;
  annotations?: Record<string, string>;
}

/** A Docker schema 2 image manifest. */
export interface Manifest {
  schemaVersion: 2;
  mediaType: string;
  config: Layer;
  layers: Layer[];
}

/** A manifest as found on disk. */
export interface StoredManifest {
  name: ModelName;
  file: string;
  manifest: Manifest;
  /** Hex SHA-256 of the file bytes (the `digest` of `/api/tags`). */
  digest: string;
  /** Bytes of the config blob and every layer. */
  size: number;
  modifiedAt: Date;
}

function isLayer(v: unknown): v is Layer {
  const l = v as Layer;
  return (
    typeof l === 'object' &&
    l !== null &&
    typeof l.mediaType === 'string' &&
    typeof l.digest === 'string' &&
    digestHex(l.digest) !== null &&
    Number.isSafeInteger(l.size) &&
    l.size >= 0 &&
    (l.annotations === undefined || (typeof l.annotations === 'object' && l.annotations !== null))
  );
}

/** Parses and checks manifest bytes; returns why they are not a usable manifest otherwise. */
export function parseManifest(bytes: Buffer | string): { manifest: Manifest } | { problem: string } {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString());
  } catch {
    return { problem: 'it is not JSON' };
  }
  const m = value as Manifest;
  if (typeof m !== 'object' || m === null) return { problem: 'it is not a JSON object' };
  if (m.schemaVersion !== 2) return { problem: `schemaVersion is ${JSON.stringify(m.schemaVersion)}, expected 2` };
  if (!isLayer(m.config)) return { problem: 'its config descriptor is missing or malformed' };
  if (!Array.isArray(m.layers) || !m.layers.every(isLayer)) return { problem: 'its layers are missing or malformed' };
  return { manifest: { ...m, mediaType: m.mediaType ?? MANIFEST_MEDIA_TYPE } };
}

/** Hex SHA-256 of some bytes. */
export function sha256Hex(bytes: Buffer | string): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Total bytes a manifest references (config included), as Ollama reports `size`. */
export function manifestSize(m: Manifest): number {
  return m.layers.reduce((n, l) => n + l.size, m.config.size);
}

/** Reads one manifest file; null when it is absent or not a usable manifest. */
export async function readManifest(file: string, name: ModelName): Promise<StoredManifest | null> {
  let bytes: Buffer;
  let mtime: Date;
  try {
    [bytes, mtime] = await Promise.all([readFile(file), stat(file).then((s) => s.mtime)]);
  } catch {
    return null;
  }
  const parsed = parseManifest(bytes);
  if ('problem' in parsed) return null;
  return { name, file, manifest: parsed.manifest, digest: sha256Hex(bytes), size: manifestSize(parsed.manifest), modifiedAt: mtime };
}

/** Serialises a manifest the way it is stored and pushed. */
export function encodeManifest(m: Manifest): Buffer {
  return Buffer.from(JSON.stringify(m));
}

/** Every manifest file in the store: `manifests/<host>/<ns>/<model>/<tag>`. */
export async function* walkManifests(root: string): AsyncGenerator<{ file: string; parts: [string, string, string, string] }> {
  const list = async (dir: string): Promise<string[]> =>
    readdir(dir, { withFileTypes: true }).then(
      (ents) => ents.filter((e) => !e.name.startsWith('.')).map((e) => e.name),
      () => [],
    );
  for (const host of await list(root)) {
    for (const ns of await list(path.join(root, host))) {
      for (const model of await list(path.join(root, host, ns))) {
        for (const tag of await list(path.join(root, host, ns, model))) {
          if (tag.endsWith('.tmp')) continue;
          yield { file: path.join(root, host, ns, model, tag), parts: [host, ns, model, tag] };
        }
      }
    }
  }
}
