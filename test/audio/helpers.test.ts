/**
 * Unit tests of the speech path's pure helpers, without a socket or a model: the cutting of long
 * audio into windows at pauses (plugins/engine/audio.ts), the greedy CTC reading of a window's
 * logits and its word times (plugins/backend-transformers/ctc.ts), and the `response_format`
 * renderings and stream events of OpenAI's audio API (plugins/api-openai/audio.ts).
 */
import { deflateSync } from 'node:zlib';
import t, { type Test } from 'tap';
import type { TranscriptionResponse, TranscriptSegment } from 'lia/engine';
import { renderTranscription, srt, timestamp, vtt, deltaEvent, doneEvent, type AudioRequest } from '../../plugins/api-openai/audio.js';
import { decodeCtc, vocabularyOf, type CtcVocabulary } from '../../plugins/backend-transformers/ctc.js';
import { ffmpegMessage, WindowCutter, type AudioWindow } from '../../plugins/engine/audio.js';

const RATE = 16000;

/** `seconds` of a 400 Hz tone (20 ms frames hold whole periods: every frame has the same energy). */
function loud(seconds: number): Float32Array {
  const n = Math.round(seconds * RATE);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = 0.5 * Math.sin((2 * Math.PI * 400 * i) / RATE);
  return out;
}

/** `samples` with [from, to) seconds silenced. */
function silence(samples: Float32Array, from: number, to: number): Float32Array {
  samples.fill(0, Math.round(from * RATE), Math.round(to * RATE));
  return samples;
}

/**
 * The windows a {@link WindowCutter} cuts from `samples` handed over in pieces of `piece` bytes
 * (by default all at once); checks that each window's samples are the audio's at its place.
 */
function planWindows(t: Test, samples: Float32Array, window: number, piece = samples.byteLength): AudioWindow[] {
  const cutter = new WindowCutter(window, RATE);
  const bytes = new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength);
  const out = [];
  for (let at = 0; at < bytes.length; at += piece) out.push(...cutter.push(bytes.slice(at, at + piece)));
  out.push(...cutter.end());
  t.equal(cutter.samples, samples.length, 'every sample taken in');
  for (const w of out) {
    const want = samples.subarray(w.start, w.start + w.length);
    if (w.samples.length !== w.length || w.samples.some((x, i) => x !== want[i])) t.fail(`the window at ${w.start} holds other samples`);
  }
  return out.map((w) => ({ start: w.start, length: w.length }));
}

/** Every sample in exactly one window, in order, none longer than `window`. */
function checkCover(t: Test, windows: AudioWindow[], total: number, window: number): void {
  let next = 0;
  for (const w of windows) {
    t.equal(w.start, next, `window at ${w.start} follows the previous one`);
    t.ok(w.length > 0 && w.length <= window, `window of ${w.length} samples fits ${window}`);
    next = w.start + w.length;
  }
  t.equal(next, total, 'the windows end with the audio');
}

t.test('windows: audio up to one window long is one window', async (t) => {
  const window = 10 * RATE;
  t.same(planWindows(t, loud(3), window), [{ start: 0, length: 3 * RATE }]);
  t.same(planWindows(t, loud(10), window), [{ start: 0, length: window }], 'exactly the window: no cut');
  t.same(planWindows(t, new Float32Array(0), window), [], 'no audio, no window');
});

t.test('windows: the cut falls in the middle of the pause in the last fifth', async (t) => {
  const window = 10 * RATE;
  // Sound everywhere but a pause from 8.6 to 9.0 s.
  const samples = silence(loud(15), 8.6, 9.0);
  const windows = planWindows(t, samples, window);
  checkCover(t, windows, samples.length, window);
  t.equal(windows.length, 2);
  const cut = windows[0]!.length / RATE;
  t.ok(Math.abs(cut - 8.8) <= 0.02, `cut at ${cut} s, the pause's middle is 8.8 s`);
});

t.test('windows: the longest of two pauses wins; a pause before the last fifth is not looked at', async (t) => {
  const window = 10 * RATE;
  const samples = silence(silence(silence(loud(14), 5.0, 6.5), 8.2, 8.3), 9.2, 9.6);
  const windows = planWindows(t, samples, window);
  checkCover(t, windows, samples.length, window);
  const cut = windows[0]!.length / RATE;
  t.ok(Math.abs(cut - 9.4) <= 0.02, `cut at ${cut} s, in the 0.4 s pause and not the 0.1 s one or the one at 5 s`);
});

t.test('windows: a pause that runs up to the window end, and audio of exactly two windows', async (t) => {
  const window = 10 * RATE;
  // Silence from 9.5 s to 10.5 s: only its part inside the window (9.5-10 s) counts.
  const samples = silence(loud(20), 9.5, 10.5);
  const windows = planWindows(t, samples, window);
  checkCover(t, windows, samples.length, window);
  const cut = windows[0]!.length / RATE;
  t.ok(Math.abs(cut - 9.75) <= 0.02, `cut at ${cut} s, the middle of the pause's part in the window`);
  t.ok(windows[0]!.length < window, 'before the window end, never past it');
  t.equal(windows.length, 3, '20 s cut before 10 s leaves more than one window');
});

t.test('windows: steady sound or silence has its cut in the middle of the last fifth', async (t) => {
  const window = 10 * RATE;
  for (const [name, samples] of [
    ['tone', loud(12)],
    ['silence', new Float32Array(12 * RATE)],
  ] as const) {
    const windows = planWindows(t, samples, window);
    checkCover(t, windows, samples.length, window);
    t.ok(Math.abs(windows[0]!.length / RATE - 9) <= 0.02, `${name}: cut at ${windows[0]!.length / RATE} s`);
  }
});

t.test('windows: a window too short to hold a frame in its last fifth is cut exactly at its end', async (t) => {
  // 50-sample windows: their last fifth (10 samples) is shorter than a 20 ms frame (320).
  const samples = loud(0.01);
  const windows = planWindows(t, samples, 50);
  checkCover(t, windows, samples.length, 50);
  t.same(
    windows.slice(0, -1).map((w) => w.length),
    Array.from({ length: windows.length - 1 }, () => 50),
  );
  t.equal(windows.at(-1)!.length, samples.length % 50 || 50);
});

t.test('windows: the same cuts however the audio arrives, a sample split between pieces included', async (t) => {
  const window = 10 * RATE;
  const samples = silence(silence(loud(35), 8.6, 9.0), 17.5, 18.4);
  for (let i = 0; i < samples.length; i += 997) samples[i] = 0.9 * Math.sin(i);
  const whole = planWindows(t, samples, window);
  t.ok(whole.length >= 4, `${whole.length} windows`);
  for (const piece of [65536, 4 * window, 4 * window + 4, 4 * 333, 1001, 7]) {
    t.same(planWindows(t, samples, window, piece), whole, `pieces of ${piece} bytes`);
  }
});

t.test('ffmpegMessage: the first line, without the temporary path or addresses', async (t) => {
  const input = '/tmp/lia-audio-x/upload';
  t.equal(ffmpegMessage(`\n[mp3 @ 0x55d0c0a1b2c0] Header missing in ${input}\nmore\n`, input), '[mp3] Header missing in file');
  t.equal(ffmpegMessage('   \n', input), '');
});

/** The fixture's vocabulary: the specials, then `|`, A-Z and the apostrophe. */
const PIECES = ['<pad>', '<s>', '</s>', '<unk>', '|', ...'ABCDEFGHIJKLMNOPQRSTUVWXYZ', "'"];
const VOCAB: CtcVocabulary = { pieces: PIECES, blank: 0, delimiter: 4, special: new Set([1, 2, 3]) };
const V = PIECES.length;
const SPF = 0.02;

/** Logits with `5` on each frame's symbol and 0 elsewhere; `_` is the blank, ` ` the delimiter, `?` `<unk>`, `.` all zero. */
function logitsOf(frames: string): Float32Array {
  const out = new Float32Array(frames.length * V);
  [...frames].forEach((c, f) => {
    if (c === '.') return;
    const id = c === '_' ? 0 : c === ' ' ? 4 : c === '?' ? 3 : PIECES.indexOf(c);
    out[f * V + id] = 5;
  });
  return out;
}

t.test('decodeCtc: repeats collapse, the blank separates, the delimiter ends a word', async (t) => {
  //           0         1         2
  //           012345678901234567890
  const frames = 'HH_E_LL_L_OO  _WORLD_';
  const result = decodeCtc(logitsOf(frames), V, VOCAB, SPF);
  t.equal(result.text, 'HELLO WORLD');
  t.same(
    result.words.map((w) => w.word),
    ['HELLO', 'WORLD'],
  );
  // HELLO from frame 0 to the end of frame 11 (the second O); WORLD from 15 to the end of 19.
  t.same(result.words[0], { word: 'HELLO', start: 0, end: 12 * SPF });
  t.same(result.words[1], { word: 'WORLD', start: 15 * SPF, end: 20 * SPF });
  t.same(
    result.tokens.map((id) => PIECES[id]),
    [...'HELLO|WORLD'],
  );
  t.equal(result.noSpeechProb, 6 / 21, 'six blank frames of 21');
  const chosen = 5 - Math.log(Math.exp(5) + (V - 1));
  t.ok(Math.abs(result.avgLogprob - chosen) < 1e-6, `mean log probability ${result.avgLogprob}`);
});

t.test('decodeCtc: an empty window, silence, and delimiters without letters', async (t) => {
  t.same(decodeCtc(new Float32Array(0), V, VOCAB, SPF), { text: '', words: [], tokens: [], avgLogprob: 0, noSpeechProb: 1 });
  const silent = decodeCtc(logitsOf('......'), V, VOCAB, SPF);
  t.equal(silent.text, '', 'all-zero frames read as the blank (the first of equal logits)');
  t.equal(silent.noSpeechProb, 1);
  t.same(silent.words, []);
  const spaces = decodeCtc(logitsOf('  _ _ '), V, VOCAB, SPF);
  t.equal(spaces.text, '');
  t.same(spaces.words, []);
});

t.test('decodeCtc: a word at the end without a delimiter; a leading and a doubled delimiter', async (t) => {
  const result = decodeCtc(logitsOf(' A_  B'), V, VOCAB, SPF);
  t.equal(result.text, 'A B');
  t.same(result.words, [
    { word: 'A', start: 1 * SPF, end: 2 * SPF },
    { word: 'B', start: 5 * SPF, end: 6 * SPF },
  ]);
});

t.test('decodeCtc: special tokens are never text nor time, but separate repeats', async (t) => {
  const result = decodeCtc(logitsOf('A??A??_ B'), V, VOCAB, SPF);
  t.equal(result.text, 'AA B');
  t.same(result.words[0], { word: 'AA', start: 0, end: 4 * SPF }, 'the word ends with its last A, not the <unk> after it');
  t.notOk(
    result.tokens.some((id) => VOCAB.special.has(id)),
    'no special id among the tokens',
  );
});

t.test('decodeCtc: a trailing partial frame is ignored', async (t) => {
  const logits = logitsOf('AB');
  const ragged = new Float32Array(logits.length + 5);
  ragged.set(logits);
  t.equal(decodeCtc(ragged, V, VOCAB, SPF).text, 'AB');
});

t.test("vocabularyOf: the tokenizer's pad is the blank, its word delimiter the delimiter", async (t) => {
  const vocab = Object.fromEntries(PIECES.map((p, i) => [p, i]));
  const tokenizer = { get_vocab: () => vocab, pad_token_id: 0, all_special_ids: [0, 1, 2, 3], config: { word_delimiter_token: '|' } };
  const v = vocabularyOf(tokenizer as unknown as Parameters<typeof vocabularyOf>[0]);
  t.equal(v.blank, 0);
  t.equal(v.delimiter, 4);
  t.same([...v.special].sort(), [1, 2, 3], 'the blank is not among the special ids');
  t.equal(v.pieces[5], 'A');
  const noDelimiter = vocabularyOf({
    ...tokenizer,
    get_vocab: () =>
      new Map([
        ['<pad>', 0],
        ['A', 1],
      ]),
    config: {},
  } as unknown as Parameters<typeof vocabularyOf>[0]);
  t.equal(noDelimiter.delimiter, -1, 'no "|" in the vocabulary: no delimiter');
});

const segment = (id: number, start: number, end: number, text: string): TranscriptSegment => ({
  id,
  start,
  end,
  text,
  tokens: [5, 6],
  avgLogprob: -0.1,
  noSpeechProb: 0.2,
  seek: Math.round(start * RATE),
});

const response = (segments: TranscriptSegment[], duration: number): TranscriptionResponse => ({
  model: 'ctc',
  task: 'transcribe',
  language: 'en',
  duration,
  sampleRate: RATE,
  text: segments.map((s) => s.text).join(' '),
  segments,
  words: segments.map((s) => ({ word: s.text, start: s.start, end: s.end })),
});

const request = (format: AudioRequest['responseFormat'], granularities: ('segment' | 'word')[] = ['segment']): AudioRequest => ({
  model: 'ctc',
  file: new Uint8Array(0),
  responseFormat: format,
  granularities: new Set(granularities),
  stream: false,
  ignored: [],
});

t.test('timestamp: commas for SubRip, dots for WebVTT, hours, rounding to the millisecond', async (t) => {
  t.equal(timestamp(0, ','), '00:00:00,000');
  t.equal(timestamp(0, '.'), '00:00:00.000');
  t.equal(timestamp(3723.456, ','), '01:02:03,456');
  t.equal(timestamp(3723.456, '.'), '01:02:03.456');
  t.equal(timestamp(59.9996, ','), '00:01:00,000', 'a carry from the milliseconds to the minutes');
  t.equal(timestamp(36_000, ','), '10:00:00,000');
  t.equal(timestamp(360_000.5, '.'), '100:00:00.500', 'more than 99 hours keeps every digit');
  t.equal(timestamp(-0.5, ','), '00:00:00,000', 'never negative');
});

t.test('srt and vtt: cues in order, the right separator, hours', async (t) => {
  const segments = [segment(0, 0.1, 1.5, 'HELLO'), segment(1, 3599.75, 3601.2, 'WORLD')];
  t.equal(srt(segments), '1\n00:00:00,100 --> 00:00:01,500\nHELLO\n\n2\n00:59:59,750 --> 01:00:01,200\nWORLD\n');
  t.equal(vtt(segments), 'WEBVTT\n\n00:00:00.100 --> 00:00:01.500\nHELLO\n\n00:59:59.750 --> 01:00:01.200\nWORLD\n');
});

t.test('an empty transcript in every format', async (t) => {
  const empty = response([], 0.4);
  t.same(renderTranscription(empty, request('json')), { type: 'application/json; charset=utf-8', body: { text: '', usage: { type: 'duration', seconds: 1 } } });
  t.same(renderTranscription(empty, request('text')), { type: 'text/plain; charset=utf-8', body: '\n' });
  t.same(renderTranscription(empty, request('srt')), { type: 'text/plain; charset=utf-8', body: '' }, 'no cue');
  t.same(renderTranscription(empty, request('vtt')), { type: 'text/vtt; charset=utf-8', body: 'WEBVTT\n\n' }, 'the header alone');
  t.same(renderTranscription(empty, request('verbose_json', ['segment', 'word'])).body, {
    task: 'transcribe',
    language: 'english',
    duration: 0.4,
    text: '',
    segments: [],
    words: [],
    usage: { type: 'duration', seconds: 1 },
  });
});

t.test('verbose_json: segments and words as the granularities ask, Whisper segment fields', async (t) => {
  const result = response([segment(0, 0.1, 1.5, 'HELLO'), segment(1, 10.02, 12.5, 'WORLD')], 12.6);
  const segmentsOnly = renderTranscription(result, request('verbose_json')).body as Record<string, unknown>;
  t.notOk('words' in segmentsOnly, 'no words unless asked');
  // Whisper's repetition measure: the text's bytes over their zlib-compressed bytes, to 3 places.
  const ratio = (text: string) => Math.round((Buffer.byteLength(text) / deflateSync(Buffer.from(text)).length) * 1000) / 1000;
  const fields = { tokens: [5, 6], temperature: 0, avg_logprob: -0.1, no_speech_prob: 0.2 };
  t.same(segmentsOnly['segments'], [
    { id: 0, seek: 1600, start: 0.1, end: 1.5, text: 'HELLO', compression_ratio: ratio('HELLO'), ...fields },
    { id: 1, seek: 160320, start: 10.02, end: 12.5, text: 'WORLD', compression_ratio: ratio('WORLD'), ...fields },
  ]);
  const repeated = renderTranscription(response([segment(0, 0, 1, 'LA '.repeat(40).trim())], 1), request('verbose_json')).body as {
    segments: { compression_ratio: number }[];
  };
  t.ok(repeated.segments[0]!.compression_ratio > 2, `a repeated text compresses well: ${repeated.segments[0]!.compression_ratio}`);
  t.same(segmentsOnly['usage'], { type: 'duration', seconds: 13 }, 'whole seconds, rounded up');
  const wordsOnly = renderTranscription(result, request('verbose_json', ['word'])).body as Record<string, unknown>;
  t.notOk('segments' in wordsOnly, 'no segments when only words are asked');
  t.same(wordsOnly['words'], result.words);
  t.equal(wordsOnly['text'], 'HELLO WORLD');
});

t.test('stream events: a space before every delta but the first; done carries the text and usage', async (t) => {
  const result = response([segment(0, 0, 1, 'HELLO'), segment(1, 1, 2, 'WORLD')], 2);
  t.same(result.segments.map(deltaEvent), [
    { type: 'transcript.text.delta', delta: 'HELLO', segment_id: '0' },
    { type: 'transcript.text.delta', delta: ' WORLD', segment_id: '1' },
  ]);
  t.same(doneEvent(result), { type: 'transcript.text.done', text: 'HELLO WORLD', usage: { type: 'duration', seconds: 2 } });
});
