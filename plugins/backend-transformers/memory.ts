/**
 * Memory estimate of a loaded ONNX encoder, from file sizes and `config.json` alone (nothing is
 * loaded to compute it), so the scheduler can budget an embedding model like a GGUF one.
 *
 * Held = weights (onnxruntime keeps one copy of the initialisers, plus ~10% for the optimised
 * graph) + the tokenizer (the parsed vocabulary takes ~30× its JSON on the heap, measured on
 * all-MiniLM's 700 KB tokenizer.json) + the peak of one forward pass at the token budget:
 * attention scores and their softmax per head (inputs × length² cells, bounded by
 * budget × length) and the layer activations (budget × (6 × width + 2 × FFN width)), all float32.
 * With onnxruntime's CPU memory arena (the default) that peak stays held once reached; without
 * it, it is given back after each pass but still counted, as the scheduler must leave room.
 *
 * Measured on all-MiniLM-L6's shape (q8, 23 MB): one 16 × 512-token pass raised the RSS by
 * ~480 MiB; the pass term below gives ~650 MiB for it (a margin, not a fit). With the default
 * budget of 4,096 tokens the whole estimate for that model is ~370 MiB.
 *
 * @module
 */
import type { OnnxLayout } from './layout.js';

/** Bytes a model holds once loaded and while running a full pass of `maxBatchTokens` tokens. */
export function estimateBytes(layout: OnnxLayout, maxBatchTokens: number): number {
  const { hiddenSize, heads, intermediateSize, maxTokens } = layout.shape;
  const weights = Math.ceil(layout.weightsBytes * 1.1);
  const tokenizer = layout.tokenizerBytes * 30;
  const tokens = Math.max(maxBatchTokens, maxTokens);
  const attention = 2.5 * heads * tokens * maxTokens;
  const activations = tokens * (6 * hiddenSize + 2 * intermediateSize);
  return weights + tokenizer + Math.ceil(4 * (attention + activations));
}
