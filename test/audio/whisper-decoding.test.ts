/**
 * The pure parts of Whisper decoding (plugins/backend-transformers/whisper-decoding.ts): the
 * special tokens read from a folder's configs, the prefix and forced steps of a window, the
 * steering of the first steps (language detection, hint, task, the suppressed first tokens),
 * the log probabilities, Whisper's no-speech rule and the timed segments; and how Whisper and
 * Moonshine folders' config.json and files are recognised (head.ts, layout.ts).
 */
import t from 'tap';
import { headOf } from '../../plugins/backend-transformers/head.js';
import { audioShapeOf, decoderShapeOf, graphsOf, weightFiles } from '../../plugins/backend-transformers/layout.js';
import {
  heardNothing,
  languageCode,
  planWindow,
  timedSegments,
  whisperTokens,
  WindowSteering,
  type WhisperTokens,
} from '../../plugins/backend-transformers/whisper-decoding.js';

// Whisper's own layout, shrunk: text below 10, then the specials, then timestamps from 21.
const VOCAB: Record<string, number> = {
  '<|endoftext|>': 10,
  '<|startoftranscript|>': 11,
  '<|en|>': 12,
  '<|de|>': 13,
  '<|translate|>': 14,
  '<|transcribe|>': 15,
  '<|startoflm|>': 16,
  '<|startofprev|>': 17,
  '<|nospeech|>': 18,
  '<|notimestamps|>': 20,
};
const GENERATION = {
  decoder_start_token_id: 11,
  eos_token_id: 10,
  lang_to_id: { '<|en|>': 12, '<|de|>': 13 },
  task_to_id: { translate: 14, transcribe: 15 },
  no_timestamps_token_id: 20,
  prev_sot_token_id: 17,
  begin_suppress_tokens: [3, 10],
  is_multilingual: true,
};
const idOf = (token: string) => VOCAB[token];
const shape = { timePrecision: 0.02, maxTokens: 16 };
const tokens: WhisperTokens = whisperTokens('m', GENERATION, {}, idOf, shape);
const V = 40;

t.test('whisperTokens: the specials from generation_config.json and the vocabulary', async (t) => {
  t.match(tokens, { eot: 10, sot: 11, previous: 17, noTimestamps: 20, noSpeech: 18, transcribe: 15, translate: 14, beginSuppress: [3, 10] });
  t.same(
    [...tokens.languages],
    [
      ['en', 12],
      ['de', 13],
    ],
  );
  const englishOnly = whisperTokens('m', { ...GENERATION, is_multilingual: false }, {}, idOf, shape);
  t.equal(englishOnly.languages.size, 0, 'an English-only model has no language tokens');
  t.equal(englishOnly.transcribe, undefined, 'nor task tokens');
  const fromConfig = whisperTokens('m', {}, { eos_token_id: 10, decoder_start_token_id: 11 }, () => undefined, shape);
  t.match(fromConfig, { eot: 10, sot: 11 });
  t.equal(fromConfig.noTimestamps, undefined, 'no timestamps when the model has no such token');
  t.throws(() => whisperTokens('m', {}, {}, () => undefined, shape), /generation_config.json names no decoder_start_token_id/);
});

t.test('planWindow: the previous text, the start, the language and the task', async (t) => {
  t.same(planWindow(tokens, { task: 'transcribe' }), { prefix: [11], forced: [null, 15], timestamps: true }, 'the language left to detect');
  t.same(planWindow(tokens, { task: 'translate', language: 'de' }).forced, [13, 14]);
  t.same(planWindow(tokens, { task: 'transcribe', language: 'DE-at' }).forced, [13, 15], 'a region is dropped, case ignored');
  t.same(
    planWindow(tokens, { task: 'transcribe', prompt: [1, 2, 3, 4, 5, 6, 7, 8, 9] }).prefix,
    [17, 3, 4, 5, 6, 7, 8, 9, 11],
    'the last 7 tokens: half of 16, less one',
  );
  t.throws(() => planWindow(tokens, { task: 'transcribe', language: 'fr' }), {
    statusCode: 400,
    param: 'language',
    message: /"fr" is not one this model transcribes/,
  });
  const englishOnly = whisperTokens('m', { ...GENERATION, is_multilingual: false }, {}, idOf, shape);
  t.same(
    planWindow(englishOnly, { task: 'translate', language: 'fr' }),
    { prefix: [11], forced: [], timestamps: true },
    'English-only: the hint and the task are moot',
  );
  t.equal(languageCode(tokens, 13), 'de');
  t.equal(languageCode(tokens, 15), undefined);
});

/** Runs a steering over scripted steps: `rows[i]` are the raw logits of step i; returns the sequence and the processed rows. */
function drive(steering: WindowSteering, prefix: number[], rows: Float32Array[]): { sequence: number[]; processed: Float32Array[] } {
  const sequence = [...prefix];
  const processed: Float32Array[] = [];
  for (const raw of rows) {
    const logits = raw.slice();
    const ids = sequence.map(BigInt);
    steering.steer(ids, logits);
    steering.record(ids, logits);
    processed.push(logits);
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
    sequence.push(best);
  }
  return { sequence, processed };
}

function row(values: Record<number, number>, base = -5): Float32Array {
  const r = new Float32Array(V).fill(base);
  for (const [i, v] of Object.entries(values)) r[Number(i)] = v;
  return r;
}

t.test('WindowSteering: detects the language at the first step, forces it and the task', async (t) => {
  const plan = planWindow(tokens, { task: 'translate' });
  const steering = new WindowSteering(tokens, plan);
  // Step 0: <|de|> beats <|en|> (and a text token, which cannot be a language); <|nospeech|> is low.
  const rows = [row({ 12: 1, 13: 3, 2: 9, 18: -1 }), row({ 15: 9 }), row({ 10: 8, 3: 9, 21: 7 }), row({ 4: 6 }), row({ 10: 6 })];
  const { sequence, processed } = drive(steering, plan.prefix, rows);
  t.equal(steering.language, 13, 'detected German from the language logits');
  t.same(sequence.slice(0, 3), [11, 13, 14], 'then the task asked, not the one the model favoured');
  t.ok(processed[0]![12] === -Infinity && processed[0]![13] === 0, 'the forced token alone survives');
  t.equal(processed[2]![3], -Infinity, 'begin_suppress_tokens at the first free step');
  t.equal(processed[2]![10], -Infinity);
  t.equal(sequence[3], 21, 'so the next best is written');
  const e = Math.exp;
  const lse = (r: Float32Array) => Math.log(Array.from(r).reduce((a, x) => a + e(x), 0));
  t.ok(Math.abs(steering.noSpeechProb - e(-1 - lse(rows[0]!))) < 1e-9, 'no_speech_prob: <|nospeech|> at the first step');
  const { generated, avgLogprob } = steering.finish(sequence);
  t.same(generated, [21, 4], 'the tokens after the forced ones, the final <|endoftext|> dropped');
  const want = [processed[2]![21]! - lse(processed[2]!), processed[3]![4]! - lse(processed[3]!), processed[4]![10]! - lse(processed[4]!)];
  t.ok(Math.abs(avgLogprob - want.reduce((a, b) => a + b) / 3) < 1e-9, `mean log probability ${avgLogprob}`);
});

t.test('WindowSteering: a hinted language is forced and reported', async (t) => {
  const plan = planWindow(tokens, { task: 'transcribe', language: 'en' });
  const steering = new WindowSteering(tokens, plan);
  const { sequence } = drive(steering, plan.prefix, [row({ 13: 9 }), row({ 14: 9 }), row({ 10: 9 })]);
  t.same(sequence, [11, 12, 15, 0], 'English and transcribe; <|endoftext|> suppressed at the first text step');
  t.equal(steering.language, 12);
});

t.test("heardNothing: Whisper's no-speech rule", async (t) => {
  t.ok(heardNothing(0.9, -1.5));
  t.notOk(heardNothing(0.9, -0.2), 'confident text is kept whatever no_speech_prob says');
  t.notOk(heardNothing(0.3, -3));
});

t.test('timedSegments: text between timestamp pairs, in seconds', async (t) => {
  const ts = (seconds: number) => 21 + Math.round(seconds / 0.02);
  t.same(timedSegments([ts(0), 1, 2, ts(1.5), ts(1.6), 3, ts(2.4)], tokens, 30), [
    { start: 0, end: 1.5, ids: [1, 2] },
    { start: 1.6, end: 2.4, ids: [3] },
  ]);
  t.same(
    timedSegments([ts(0.5), 1, ts(1), ts(1.2), 2], tokens, 3.5),
    [
      { start: 0.5, end: 1, ids: [1] },
      { start: 1.2, end: 3.5, ids: [2] },
    ],
    'text left open ends with the window',
  );
  t.same(timedSegments([1, 18, 2, ts(0.8)], tokens, 4), [{ start: 0, end: 0.8, ids: [1, 2] }], 'specials dropped; no opening timestamp: from 0');
  t.same(timedSegments([ts(0), ts(0.3)], tokens, 4), [], 'no text, no segment');
  const untimed = whisperTokens('m', {}, { eos_token_id: 10, decoder_start_token_id: 11 }, () => undefined, shape);
  t.same(timedSegments([1, 2, 25], untimed, 4), [{ start: 0, end: 4, ids: [1, 2] }], 'a model without timestamps: one segment');
});

t.test('Whisper and Moonshine folders: their head, their two graphs per dtype, their shapes', async (t) => {
  t.same(headOf({ architectures: ['WhisperForConditionalGeneration'] }), { kind: 'whisper' });
  t.same(weightFiles(graphsOf({ kind: 'whisper' }), 'q8'), ['onnx/encoder_model_quantized.onnx', 'onnx/decoder_model_merged_quantized.onnx']);
  t.same(weightFiles(graphsOf({ kind: 'ctc' }), 'fp32'), ['onnx/model.onnx']);
  t.match(audioShapeOf({}, { sampling_rate: 16000, chunk_length: 30, hop_length: 160 }), { sampleRate: 16000, windowSeconds: 30, frameSamples: 320 });
  const window = { sampleRate: 16000, windowSeconds: 30, frameSamples: 320 };
  t.match(decoderShapeOf({ decoder_layers: 4, max_target_positions: 448, max_source_positions: 1500, vocab_size: 51865, num_mel_bins: 80 }, {}, window), {
    layers: 4,
    maxTokens: 448,
    encoderFrames: 1500,
    vocabSize: 51865,
    melBins: 80,
  });
  t.same(headOf({ architectures: ['MoonshineForConditionalGeneration'] }), { kind: 'moonshine' });
  t.same(graphsOf({ kind: 'moonshine' }), ['encoder_model', 'decoder_model_merged']);
  t.match(
    decoderShapeOf({ decoder_num_hidden_layers: 6, max_position_embeddings: 194, vocab_size: 32768 }, { max_length: 448 }, window),
    {
      layers: 6,
      maxTokens: 194,
      encoderFrames: 1500,
      melBins: 0,
    },
    "Moonshine's names; a frame per 320 samples of the window",
  );
});
