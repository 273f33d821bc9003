/**
 * Where things live in the store. The layout is Ollama's, so an operator can point the appliance
 * at an existing `OLLAMA_MODELS` folder:
 *
 * ```
 * <root>/manifests/<host>/<namespace>/<model>/<tag>
 * <root>/blobs/sha256-<64 hex>
 * <root>/blobs/sha256-<64 hex>-partial(.json)   resumable downloads
 * <root>/.lia/<format>/<manifest hex>/...        models whose backend loads a folder (ONNX), laid out
 * ```
 *
 * @module
 */
import path from 'node:path';
import { Errors } from 'lia/plugin';
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
  /** Where models of `folder`-layout formats are laid out, one folder per format. */
  readonly layouts: string;

  constructor(root: string) {
    this.root = path.resolve(root);
    this.manifests = path.join(this.root, 'manifests');
    this.blobs = path.join(this.root, 'blobs');
    this.layouts = path.join(this.root, '.lia');
  }

  /** The laid-out folder of a model (its manifest digest) of a `folder`-layout format. */
  layout(format: string, manifestDigest: string): string {
    if (!/^[a-z0-9][a-z0-9_-]{0,31}$/.test(format) || !/^[0-9a-f]{64}$/.test(manifestDigest)) throw Errors.badRequest('invalid model layout');
    return path.join(this.layouts, format, manifestDigest);
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
