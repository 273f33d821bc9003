/**
 * What an ONNX folder's network does, from its `config.json`: a sentence encoder (token vectors,
 * pooled into embeddings) or a cross-encoder (a `*ForSequenceClassification` architecture: one
 * relevance score per query and document pair, a reranker) or a speech recogniser (a `*ForCTC`
 * architecture: characters per audio frame; or `WhisperForConditionalGeneration` and
 * `MoonshineForConditionalGeneration`: an encoder and a decoder that writes tokens, for
 * transcription, and translation with Whisper). The format handler lists the model's capability
 * from it, and the backend picks the loader with it.
 *
 * @module
 */

/** How the network's output is read: pooled token vectors, a classifier's logits, a CTC recogniser's frames, or the tokens a Whisper or Moonshine decoder writes. */
export type OnnxHead = { kind: 'encoder' } | { kind: 'cross-encoder'; labels: number } | { kind: 'ctc' } | { kind: 'whisper' } | { kind: 'moonshine' };

/** Whether a head is a speech recogniser (the `transcription` capability). */
export function isSpeech(head: OnnxHead): boolean {
  return head.kind === 'ctc' || head.kind === 'whisper' || head.kind === 'moonshine';
}

/**
 * The head `config.json` declares. A classifier's label count is its `id2label` size (or
 * `num_labels`), 1 when neither is given: rerankers have one label (a logit) or two (a softmax
 * whose second class is "relevant").
 */
export function headOf(config: Record<string, unknown>): OnnxHead {
  const architectures = Array.isArray(config['architectures']) ? config['architectures'] : [];
  if (architectures.some((a) => typeof a === 'string' && a.endsWith('ForCTC'))) return { kind: 'ctc' };
  if (architectures.includes('WhisperForConditionalGeneration')) return { kind: 'whisper' };
  if (architectures.includes('MoonshineForConditionalGeneration')) return { kind: 'moonshine' };
  if (!architectures.some((a) => typeof a === 'string' && a.endsWith('ForSequenceClassification'))) return { kind: 'encoder' };
  const id2label = config['id2label'];
  const fromMap = id2label && typeof id2label === 'object' ? Object.keys(id2label).length : 0;
  const declared = typeof config['num_labels'] === 'number' ? config['num_labels'] : 0;
  return { kind: 'cross-encoder', labels: fromMap || declared || 1 };
}

/** The relevance probability of one pair from its logits: the sigmoid of one logit, or the softmax's second class of two. */
export function relevance(logits: ArrayLike<number>): number {
  if (logits.length === 1) return 1 / (1 + Math.exp(-logits[0]!));
  const max = Math.max(logits[0]!, logits[1]!);
  const e0 = Math.exp(logits[0]! - max);
  const e1 = Math.exp(logits[1]! - max);
  return e1 / (e0 + e1);
}
