/**
 * Memory estimate of a GGUF model before loading it, from its header alone (no native code runs
 * in the appliance process): weights (the file size; mmap pages them in), the KV cache of
 * `parallel` sequences of `contextLength` tokens in F16 and a compute buffer for one batch (the
 * format's `footprint`, which any llama.cpp engine shares), plus the runner process itself (the
 * backend's `estimateMemory`). The scheduler budgets with it; `/api/ps` shows the real figure.
 *
 * @module
 */
import { stat } from 'node:fs/promises';

/** Resident memory of an idle runner process (Node + the llama.cpp bindings), with a margin (bench/results/2026-11-27-code-notes.md). */
export const RUNNER_OVERHEAD_BYTES = 48 * 1024 * 1024;

/** The GGUF facts the estimate needs. */
export interface GgufShape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads: number;
  trainedContext: number;
  vocab: number;
}

const IGNORED = ['tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'];

/** Reads the shape of a model from its GGUF header. */
export async function readShape(modelPath: string): Promise<GgufShape> {
  // Imported on first use: node-llama-cpp's JavaScript holds memory that an idle appliance
  // without a loaded model should not pay for.
  const { readGgufFileInfo } = await import('node-llama-cpp');
  const info = await readGgufFileInfo(modelPath, { readTensorInfo: false, ignoreKeys: IGNORED, logWarnings: false });
  const arch = info.architectureMetadata as Record<string, unknown> & { attention?: Record<string, unknown> };
  const num = (v: unknown, fallback: number): number => (typeof v === 'number' && v > 0 ? v : fallback);
  const heads = num(arch.attention?.['head_count'], 1);
  const tokens = (info.metadata as unknown as { tokenizer?: { ggml?: { tokens?: unknown[] } } }).tokenizer?.ggml?.tokens;
  return {
    layers: num(arch['block_count'], 1),
    embedding: num(arch['embedding_length'], 1),
    heads,
    kvHeads: num(arch.attention?.['head_count_kv'], heads),
    trainedContext: num(arch['context_length'], 2048),
    vocab: num(arch['vocab_size'], Array.isArray(tokens) ? tokens.length : 32000),
  };
}

/** Bytes for weights + KV cache + one batch's compute buffer (not the engine's process). */
export function estimateBytes(shape: GgufShape, fileBytes: number, opts: { contextLength: number; parallel: number; batchSize: number }): number {
  const ctx = opts.contextLength > 0 ? Math.min(opts.contextLength, shape.trainedContext) : shape.trainedContext;
  const kvWidth = (shape.embedding / shape.heads) * shape.kvHeads;
  const kv = 2 * shape.layers * ctx * opts.parallel * kvWidth * 2;
  const batch = Math.min(opts.batchSize, ctx * opts.parallel);
  const compute = batch * (shape.vocab + 8 * shape.embedding) * 4;
  return Math.ceil(fileBytes + kv + compute);
}

/** The file size of a model (its weights). */
export async function fileBytes(modelPath: string): Promise<number> {
  return (await stat(modelPath)).size;
}
