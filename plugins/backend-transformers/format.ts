/**
 * The `onnx` model format as this backend serves it: a Hugging Face ONNX folder (`config.json`,
 * `tokenizer.json`, `onnx/model*.onnx`, ...). The store keeps one
 * `application/vnd.lia.onnx.file` layer per file, its relative path in the layer's
 * `org.opencontainers.image.title` annotation, and lays the files out again as a folder for
 * loading (`layout: 'folder'`). Such models embed, or rerank when `config.json` names a
 * sequence-classification architecture, transcribe when it names a CTC one, Whisper's or
 * Moonshine's, speak when it names `VitsModel` (head.ts); they do not generate text from text.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { Errors } from 'lia/plugin';
import type { FormatHandler } from 'lia/engine';
import { humanNumber } from 'lia/utils';
import { headOf, isSpeech, voicesOf, type OnnxHead } from './head.js';
import { graphsOf, weightFiles } from './layout.js';

/** The layer type of one file of an ONNX model folder. */
export const ONNX_MEDIA_TYPE = 'application/vnd.lia.onnx.file';

/** The `onnx` format handler. */
export const onnxFormat: FormatHandler = {
  name: 'onnx',
  mediaTypes: [ONNX_MEDIA_TYPE],
  layout: 'folder',
  files: 'the files of an ONNX model folder (config.json and onnx/*.onnx)',
  recognise(names) {
    if (!names.some((n) => n.endsWith('.onnx'))) return null;
    return names.includes('config.json') ? {} : { problem: 'an ONNX model folder needs its config.json' };
  },
  /**
   * `family` is `config.json`'s `model_type`; the parameter count is estimated from the fp32
   * weights (both graphs of an encoder-decoder) at 4 bytes a parameter.
   */
  async describe({ weights }) {
    const config = weights.find((f) => f.name === 'config.json');
    let family = 'unknown';
    let capability: 'embedding' | 'rerank' | 'transcription' | 'speech' = 'embedding';
    let head: OnnxHead = { kind: 'encoder' };
    let voices: string[] | undefined;
    if (config) {
      try {
        const parsed = JSON.parse(await readFile(config.path, 'utf8')) as Record<string, unknown>;
        if (typeof parsed['model_type'] === 'string') family = parsed['model_type'];
        head = headOf(parsed);
        if (head.kind === 'vits') voices = voicesOf(parsed);
      } catch {
        throw Errors.badRequest('config.json of the ONNX model is not valid JSON');
      }
    }
    if (head.kind === 'cross-encoder') capability = 'rerank';
    if (isSpeech(head)) capability = 'transcription';
    if (head.kind === 'vits') capability = 'speech';
    const fp32 = weightFiles(graphsOf(head), 'fp32').map((name) => weights.find((f) => f.name === name));
    const fp32Bytes = fp32.every((f) => f !== undefined) ? fp32.reduce((a, f) => a + (f?.size ?? 0), 0) : 0;
    const quantized = weights.find((f) => /quantized|int8|uint8/.test(f.name ?? ''));
    return {
      details: {
        family,
        families: [family],
        // The graph itself is a rounding error next to the weights.
        parameter_size: fp32Bytes ? humanNumber(Math.round(fp32Bytes / 4)) : '',
        quantization_level: fp32Bytes ? 'F32' : quantized ? 'Q8_0' : '',
      },
      capabilities: [capability],
      ...(voices ? { voices } : {}),
    };
  },
};
