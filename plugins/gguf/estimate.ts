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
import type { LayerCosts } from 'lia/engine';
import { readGgufHeader, type TensorBytes } from './header.js';

/** The GGUF facts the estimate needs. */
export interface GgufShape {
  layers: number;
  embedding: number;
  heads: number;
  kvHeads: number;
  /** Width of one attention head's keys and values (`attention.key_length` / `value_length`, else embedding ÷ heads). */
  headDimK: number;
  headDimV: number;
  trainedContext: number;
  vocab: number;
  /** The tensor data by what a GPU offload moves (the header reader's groups). */
  tensorBytes: TensorBytes;
}

/** Arrays the shape does not need: walked past, never kept. */
const IGNORED = ['tokenizer.ggml.merges', 'tokenizer.ggml.token_type', 'tokenizer.ggml.scores'];

/** Reads the shape of a model from its GGUF header (the bounded reader of header.ts). */
export async function readShape(modelPath: string): Promise<GgufShape> {
  const { metadata, arrayLengths, tensorBytes } = await readGgufHeader(modelPath, { maxArrayLength: 0, ignoreKeys: IGNORED });
  const arch = metadata.get('general.architecture');
  const key = (name: string): unknown => metadata.get(`${typeof arch === 'string' ? arch : 'llama'}.${name}`);
  const num = (v: unknown, fallback: number): number => (typeof v === 'number' && v > 0 ? v : fallback);
  const heads = num(key('attention.head_count'), 1);
  const embedding = num(key('embedding_length'), 1);
  const headDimK = num(key('attention.key_length'), Math.floor(embedding / heads));
  return {
    layers: num(key('block_count'), 1),
    embedding: num(key('embedding_length'), 1),
    heads,
    kvHeads: num(key('attention.head_count_kv'), heads),
    headDimK,
    headDimV: num(key('attention.value_length'), headDimK),
    trainedContext: num(key('context_length'), 2048),
    vocab: num(key('vocab_size'), arrayLengths.get('tokenizer.ggml.tokens') || 32000),
    tensorBytes,
  };
}

interface LoadShape {
  contextLength: number;
  parallel: number;
  batchSize: number;
  /** The KV cache's element type; absent: f16. */
  kvCacheType?: 'f16' | 'q8_0' | 'q4_0' | undefined;
}

/** Bytes per KV cache element: f16, and ggml's blocks of 32 (q8_0: 34 bytes, q4_0: 18). */
const KV_ELEMENT_BYTES = { f16: 2, q8_0: 34 / 32, q4_0: 18 / 32 } as const;

/** Whether llama.cpp can hold this model's cache in `type`: a quantized type's blocks of 32 must divide a head's width. */
export function kvCacheFits(shape: GgufShape, type: 'f16' | 'q8_0' | 'q4_0'): boolean {
  return type === 'f16' || (shape.headDimK % 32 === 0 && shape.headDimV % 32 === 0);
}

/** KV cache bytes of one layer (keys and values in the load's type) and one batch's compute buffer. */
function caches(shape: GgufShape, opts: LoadShape): { kvPerLayer: number; compute: number } {
  const ctx = opts.contextLength > 0 ? Math.min(opts.contextLength, shape.trainedContext) : shape.trainedContext;
  const kvWidth = (shape.embedding / shape.heads) * shape.kvHeads;
  const batch = Math.min(opts.batchSize, ctx * opts.parallel);
  const element = KV_ELEMENT_BYTES[opts.kvCacheType ?? 'f16'];
  return { kvPerLayer: 2 * ctx * opts.parallel * kvWidth * element, compute: batch * (shape.vocab + 8 * shape.embedding) * 4 };
}

/** Bytes for weights + KV cache + one batch's compute buffer (not the engine's process). */
export function estimateBytes(shape: GgufShape, fileBytes: number, opts: LoadShape): number {
  const { kvPerLayer, compute } = caches(shape, opts);
  return Math.ceil(fileBytes + shape.layers * kvPerLayer + compute);
}

/**
 * What a GPU offload moves: each repeating layer's weights with its KV cache, the output layer,
 * and the compute buffer a device holds for any offload (the engine's offload plan divides the
 * model by these).
 */
export function offloadCosts(shape: GgufShape, opts: LoadShape): LayerCosts {
  const { kvPerLayer, compute } = caches(shape, opts);
  return {
    layers: shape.layers,
    bytesPerLayer: Math.ceil(shape.tensorBytes.layers / shape.layers + kvPerLayer),
    outputBytes: shape.tensorBytes.output,
    fixedBytes: Math.ceil(compute),
  };
}

/** The file size of a model (its weights). */
export async function fileBytes(modelPath: string): Promise<number> {
  return (await stat(modelPath)).size;
}
