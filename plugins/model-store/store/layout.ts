/**
 * Models given as a set of named files (an ONNX folder: `config.json`, `onnx/model.onnx`, ...):
 * the store keeps one layer per file with its relative path in the
 * `org.opencontainers.image.title` annotation, and, for a format whose backend loads a folder
 * (`FormatHandler.layout` `folder`), lays the files out again as one (hard links to the blobs).
 *
 * @module
 */
import { link, lstat, mkdir, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { TITLE_ANNOTATION, type Layer } from './manifest.js';

/** A relative file path inside a model folder: forward slashes, no `..`, no absolute paths. */
const SAFE_SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$/;

/** Checks a relative file name of a model folder; returns why it is unsafe, or null. */
export function relativePathProblem(name: string): string | null {
  if (name.length === 0 || name.length > 512) return 'the file name is empty or too long';
  const segments = name.split('/');
  if (segments.length > 8) return 'the file name is nested too deeply';
  for (const s of segments) {
    if (!SAFE_SEGMENT.test(s)) return `"${s.replace(/[^\x20-\x7e]/g, '?')}" is not an allowed file or folder name`;
  }
  return null;
}

/** The relative path a file layer carries. */
export function layerTitle(layer: Layer): string | undefined {
  return layer.annotations?.[TITLE_ANNOTATION];
}

/**
 * Lays out named file layers under `dir` (hard links, symlinks where linking is not possible) and
 * returns `dir`. Built in a temp folder and renamed, so a reader never sees half. Layers without a
 * safe name are left out.
 */
export async function materialiseFolder(dir: string, files: Layer[], blobPath: (digest: string) => string): Promise<string> {
  if (
    await lstat(dir).then(
      () => true,
      () => false,
    )
  )
    return dir;
  const tmp = `${dir}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    for (const layer of files) {
      const rel = layerTitle(layer);
      if (rel === undefined || relativePathProblem(rel)) continue;
      const target = path.join(tmp, ...rel.split('/'));
      await mkdir(path.dirname(target), { recursive: true });
      const source = blobPath(layer.digest);
      await link(source, target).catch(() => symlink(source, target));
    }
    await mkdir(path.dirname(dir), { recursive: true });
    await rename(tmp, dir).catch(async (err: NodeJS.ErrnoException) => {
      // Another resolve won the race; its folder is identical.
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
      await rm(tmp, { recursive: true, force: true });
    });
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  return dir;
}
