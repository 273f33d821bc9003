/**
 * Where things live in the store. The layout is Ollama's, so an operator can point the appliance
 * at an existing `OLLAMA_MODELS` folder:
 *
 * ```
 * <root>/manifests/<host>/<namespace>/<model>/<tag>
 * <root>/blobs/sha256-<64 hex>
 * <root>/blobs/sha256-<64 hex>-partial(.json)   resumable downloads
 * <root>/.lia/onnx/<manifest hex>/...            ONNX models laid out for the backend
 * ```
 *
 * @module
 */
import path from 'node:path';
import { Errors } from '../../../core/index.js';
import type { ModelName } from './names.js';

const DIGEST = /^sha256[:-]([0-9a-fA-F]{64})$/;

/** The hex part of a `sha256:<hex>` (or `sha256-<hex>`) digest, lower-cased; null when invalid. */
export function digestHex(digest: string): string | null {
  const m = DIGEST.exec(digest);
  return m ? m[1]!.toLowerCase() : null;
}

/** Normalises a digest to `sha256:<hex>`; a malformed one is a 400. */
export function normalizeDigest(digest: string): string {
  const hex = digestHex(digest);
  if (!hex) throw Errors.badRequest(`invalid digest format "${digest.slice(0, 100)}": expected sha256:<64 hex digits>`);
  return `sha256:${hex}`;
}

/** Paths of one store root. */
export class StorePaths {
  readonly root: string;
  readonly manifests: string;
  readonly blobs: string;
  readonly onnx: string;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.manifests = path.join(this.root, 'manifests');
    this.blobs = path.join(this.root, 'blobs');
    this.onnx = path.join(this.root, '.lia', 'onnx');
  }

  /** The blob file of a (valid) digest. */
  blob(digest: string): string {
    const hex = digestHex(digest);
    if (!hex) throw Errors.badRequest(`invalid digest format "${digest.slice(0, 100)}"`);
    return path.join(this.blobs, `sha256-${hex}`);
  }

  /** The manifest file of a (validated) name; checks once more that it stays inside the store. */
  manifest(name: ModelName): string {
    const file = path.join(this.manifests, name.host, name.namespace, name.model, name.tag);
    if (!file.startsWith(this.manifests + path.sep)) throw Errors.badRequest('invalid model name');
    return file;
  }
}
