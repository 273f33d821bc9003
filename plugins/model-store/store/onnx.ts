/**
 * ONNX models (Hugging Face layout: `config.json`, `tokenizer.json`, `onnx/model*.onnx`, ...). The
 * store keeps one layer per file with the relative path in the `org.opencontainers.image.title`
 * annotation, and lays the files out again as a folder (hard links to the blobs) for the backend.
 *
 * @module
 */
import { link, lstat, mkdir, readFile, rename, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Errors, type ModelDetails } from '../../../core/index.js';
import { humanNumber } from './gguf.js';
import { MediaTypes, TITLE_ANNOTATION, type Layer } from './manifest.js';

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

/** True when a set of files is an ONNX model folder. */
export function isOnnxFileSet(names: string[]): boolean {
  return names.some((n) => n.endsWith('.onnx'));
}

/** The relative path a file layer carries. */
export function layerTitle(layer: Layer): string | undefined {
  return layer.annotations?.[TITLE_ANNOTATION];
}

/** The file layers of an ONNX manifest. */
export function onnxFiles(layers: Layer[]): Layer[] {
  return layers.filter((l) => l.mediaType === MediaTypes.onnxFile && layerTitle(l) !== undefined);
}

/** `details` for an ONNX folder, from its `config.json` and the size of the fp32 weights. */
export async function onnxDetails(files: Layer[], blobPath: (digest: string) => string): Promise<ModelDetails> {
  const configLayer = files.find((l) => layerTitle(l) === 'config.json');
  let family = 'unknown';
  if (configLayer) {
    try {
      const config = JSON.parse(await readFile(blobPath(configLayer.digest), 'utf8')) as { model_type?: unknown };
      if (typeof config.model_type === 'string') family = config.model_type;
    } catch {
      throw Errors.badRequest('config.json of the ONNX model is not valid JSON');
    }
  }
  const fp32 = files.find((l) => layerTitle(l) === 'onnx/model.onnx');
  const quantized = files.find((l) => /quantized|int8|uint8/.test(layerTitle(l) ?? ''));
  return {
    parent_model: '',
    format: 'onnx',
    family,
    families: [family],
    // fp32 weights are 4 bytes a parameter; the graph itself is a rounding error.
    parameter_size: fp32 ? humanNumber(Math.round(fp32.size / 4)) : '',
    quantization_level: fp32 ? 'F32' : quantized ? 'Q8_0' : '',
  };
}

/**
 * Lays out the files of an ONNX manifest under `dir` (hard links, symlinks where linking is not
 * possible) and returns `dir`. Built in a temp folder and renamed, so a reader never sees half.
 */
export async function materialiseOnnx(dir: string, files: Layer[], blobPath: (digest: string) => string): Promise<string> {
  if (await lstat(dir).then(() => true, () => false)) return dir;
  const tmp = `${dir}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    for (const layer of files) {
      const rel = layerTitle(layer)!;
      if (relativePathProblem(rel)) continue;
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
