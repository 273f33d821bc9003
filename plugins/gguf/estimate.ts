/**
 * Memory estimate of a GGUF model before loading it, from its header alone (no native code runs
 * in the appliance process): weights (the file size; mmap pages them in), the KV cache of
 * `parallel` sequences of `contextLength` tokens in F16 and a compute buffer for one batch. This
 * is the format's `footprint`, which every llama.cpp engine shares; each engine adds its own
 * process in its `estimateMemory`. The scheduler budgets with it; `/api/ps` shows the real figure.
 *
 * @module
 */
import { stat } from 'node:fs/promises';
import { readGgufHeader } from './header.js';

/** The GGUF facts the estimate needs. */
export interface GgufShape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads: number;
  trainedContext: number;
  vocab: number;
}

/** Arrays the shape does not need: walked past, never kept. */
const IGNORED = ['tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'];

/** Reads the shape of a model from its GGUF header (the bounded reader of header.ts). */
export async function readShape(modelPath: string): Promise<GgufShape> {
  const { metadata, arrayLengths } = await readGgufHeader(modelPath, { maxArrayLength: 0, ignoreKeys: IGNORED });
  const arch = metadata.get('general.architecture');
  const key = (name: string): unknown => metadata.get(`${typeof arch === 'string' ? arch : 'llama'}.${name}`);
  const num = (v: unknown, fallback: number): number => (typeof v === 'number' && v > 0 ? v : fallback);
  const heads = num(key('attention.head_count'), 1);
  return {
    layers: num(key('block_count'), 1),
    embedding: num(key('embedding_length'), 1),
    heads,
    kvHeads: num(key('attention.head_count_kv'), heads),
    trainedContext: num(key('context_length'), 2048),
    vocab: num(key('vocab_size'), arrayLengths.get('tokenizer.ggml.tokens') || 32000),
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
