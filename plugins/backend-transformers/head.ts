/**
 * What an ONNX folder's network does, from its `config.json`: a sentence encoder (token vectors,
 * pooled into embeddings) or a cross-encoder (a `*ForSequenceClassification` architecture: one
 * relevance score per query and document pair, a reranker) or a speech recogniser (a `*ForCTC`
 * architecture: characters per audio frame; or `WhisperForConditionalGeneration` and
 * `MoonshineForConditionalGeneration`: an encoder and a decoder that writes tokens, for
 * transcription, and translation with Whisper) or a speech synthesiser (`VitsModel`, MMS-TTS: a
 * waveform from text). The format handler lists the model's capability (and a synthesiser's
 * voices) from it, and the backend picks the loader with it.
 *
 * @module
 */

/** How the network's output is read: pooled token vectors, a classifier's logits, a CTC recogniser's frames, the tokens a Whisper or Moonshine decoder writes, or a synthesiser's waveform. */
export type OnnxHead =
  { kind: 'encoder' } | { kind: 'cross-encoder'; labels: number } | { kind: 'ctc' } | { kind: 'whisper' } | { kind: 'moonshine' } | { kind: 'vits' };

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
  if (architectures.includes('VitsModel')) return { kind: 'vits' };
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

/** The voice of a single-speaker synthesiser. */
export const DEFAULT_VOICE = 'default';

/**
 * A synthesiser's voices in speaker-id order, from `config.json`: the names of `speaker_id_map`
 * (`{"name": id}`, Piper's field) when it names every speaker, else `speaker_0` ... for
 * `num_speakers` above 1, else the one voice {@link DEFAULT_VOICE}.
 */
export function voicesOf(config: Record<string, unknown>): string[] {
  const declared = config['num_speakers'];
  const count = typeof declared === 'number' && Number.isInteger(declared) && declared > 1 && declared <= 10_000 ? declared : 1;
  const map = config['speaker_id_map'];
  if (map && typeof map === 'object' && !Array.isArray(map)) {
    const names: string[] = [];
    for (const [name, id] of Object.entries(map)) if (typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < count) names[id] = name;
    if (names.length === count && names.every((n) => typeof n === 'string' && n.length > 0)) return names;
  }
  return count === 1 ? [DEFAULT_VOICE] : Array.from({ length: count }, (_, i) => `speaker_${i}`);
}
