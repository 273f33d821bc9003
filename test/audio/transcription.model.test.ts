/**
 * Speech end to end over the real HTTPS API with the official `openai` client: the designed
 * `tiny-ctc` fixture (npm run fixtures) created through `/api/blobs` + `/api/create`, shown with
 * the `transcription` capability, and asked through `audio.transcriptions.create` and
 * `audio.translations.create`. Text written as tones comes back exactly, from every container
 * OpenAI accepts (encoded by ffmpeg at 44.1 kHz, so LIA decodes and resamples); words and
 * segments are timed where the tones were, across the model's 10 s window; every response
 * format and the stream; espeak-ng's real speech goes through the same path.
 */
import { toFile } from 'openai';
import t from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture } from '../api-openai/openai-client.js';
import { CONTAINERS, encode, readWav, speak, tones } from './signals.js';

const folder = await builtFixture('tiny-ctc');
const fx = await openaiFixture(t, { ctc: folder, minilm: 'onnx/tiny-random-minilm' });
const { app, client } = fx;

const TEXT = "HELLO WORLD IT'S LIA";
const signal = tones(TEXT);

t.test('shown with the transcription capability', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'ctc' }) });
  const show = (await res.json()) as { capabilities: string[]; details: { family: string; format: string } };
  t.same(show.capabilities, ['transcription']);
  t.equal(show.details.family, 'wav2vec2');
  t.equal(show.details.format, 'onnx');
});

for (const container of Object.keys(CONTAINERS)) {
  t.test(`the exact transcript from ${container}`, async (t) => {
    const file = await toFile(encode(signal.samples, container), `speech.${container}`);
    const result = await client.audio.transcriptions.create({ file, model: 'ctc' });
    t.equal(result.text, TEXT);
  });
}

t.test('verbose_json: words and segments where the tones are', async (t) => {
  const file = await toFile(encode(signal.samples, 'flac'), 'speech.flac');
  const result = await client.audio.transcriptions.create({
    file,
    model: 'ctc',
    response_format: 'verbose_json',
    timestamp_granularities: ['word', 'segment'],
    language: 'en',
  });
  t.equal(result.text, TEXT);
  t.equal(result.language, 'english');
  t.ok(Math.abs(result.duration - signal.samples.length / 16000) < 0.05, `duration ${result.duration}`);
  t.same(
    result.words!.map((w) => w.word),
    TEXT.split(' '),
  );
  result.words!.forEach((w, i) => {
    const want = signal.words[i]!;
    t.ok(Math.abs(w.start - want.start) <= 0.04 && Math.abs(w.end - want.end) <= 0.04, `${w.word} ${w.start}-${w.end} vs ${want.start}-${want.end}`);
  });
  t.equal(result.segments!.length, 1);
  t.equal(result.segments![0]!.text, TEXT);
  t.ok(result.segments![0]!.tokens.length > 0);
  t.same(result.usage, { type: 'duration', seconds: Math.ceil(result.duration) });
});

t.test('audio longer than the 10 s window: chunked, times right across the chunks', async (t) => {
  // 25 words of 4 letters: about 18 s of tones.
  const words = Array.from({ length: 25 }, (_, i) => String.fromCharCode(65 + (i % 26)).repeat(1) + 'BCD'.slice(0, 3)).join(' ');
  const long = tones(words);
  t.ok(long.samples.length / 16000 > 12, `${long.samples.length / 16000} s`);
  const file = await toFile(encode(long.samples, 'wav'), 'long.wav');
  const result = await client.audio.transcriptions.create({
    file,
    model: 'ctc',
    response_format: 'verbose_json',
    timestamp_granularities: ['word', 'segment'],
  });
  t.equal(result.text, words);
  t.ok(result.segments!.length >= 2, `${result.segments!.length} segments`);
  t.ok(result.segments![0]!.end <= 10 && result.segments![1]!.start >= result.segments![0]!.end, JSON.stringify(result.segments!.map((s) => [s.start, s.end])));
  t.ok(result.segments![1]!.seek > 0, 'the second window starts later');
  result.words!.forEach((w, i) => {
    const want = long.words[i]!;
    if (Math.abs(w.start - want.start) > 0.04 || Math.abs(w.end - want.end) > 0.04) t.fail(`${i} ${w.word} ${w.start}-${w.end} vs ${want.start}-${want.end}`);
  });
  t.equal(result.words!.length, long.words.length);
});

t.test('four transcriptions at once: each its own exact text, words and segments where its tones are', async (t) => {
  // Four different texts of 12-16 s (two windows each), so the requests' windows interleave on the one model.
  const texts = [
    'ALPHA BRAVO CHARLIE DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA',
    'RIVER STONE GARDEN WINDOW MARKET BRIDGE AUTUMN WINTER NORTH SOUTH',
    'ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE THIRTEEN',
    "QUIET VOICE MODEL SOUND LIGHT IT'S A TEST OF MANY WORDS AT ONCE",
  ];
  const signals = texts.map((text) => tones(text));
  const results = await Promise.all(
    signals.map(async (s, i) =>
      client.audio.transcriptions.create({
        file: await toFile(encode(s.samples, 'flac'), `speech-${i}.flac`),
        model: 'ctc',
        response_format: 'verbose_json',
        timestamp_granularities: ['word', 'segment'],
      }),
    ),
  );
  results.forEach((result, i) => {
    const want = signals[i]!;
    t.equal(result.text, texts[i], `request ${i}: its own text`);
    t.ok(Math.abs(result.duration - want.samples.length / 16000) < 0.05, `request ${i}: duration ${result.duration}`);
    t.ok(result.segments!.length >= 2, `request ${i}: ${result.segments!.length} segments`);
    t.equal(result.segments!.map((seg) => seg.text).join(' '), texts[i]);
    t.equal(result.words!.length, want.words.length, `request ${i}: every word`);
    result.words!.forEach((w, k) => {
      const placed = want.words[k]!;
      if (w.word !== placed.word || Math.abs(w.start - placed.start) > 0.04 || Math.abs(w.end - placed.end) > 0.04) {
        t.fail(`request ${i} word ${k}: ${w.word} ${w.start}-${w.end} vs ${placed.word} ${placed.start}-${placed.end}`);
      }
    });
    for (const seg of result.segments!) {
      const inside = result.words!.filter((w) => w.start >= seg.start - 1e-6 && w.end <= seg.end + 1e-6);
      t.equal(inside.map((w) => w.word).join(' '), seg.text, `request ${i}: segment ${seg.id} spans its words`);
    }
  });
});

t.test('text, srt and vtt', async (t) => {
  const file = () => toFile(encode(signal.samples, 'wav'), 'speech.wav');
  const text = await client.audio.transcriptions.create({ file: await file(), model: 'ctc', response_format: 'text' });
  t.equal(text, `${TEXT}\n`);
  const srt = await client.audio.transcriptions.create({ file: await file(), model: 'ctc', response_format: 'srt' });
  t.match(srt, new RegExp(`^1\\n00:00:00,\\d{3} --> 00:00:0\\d,\\d{3}\\n${TEXT}\\n$`));
  const vtt = await client.audio.transcriptions.create({ file: await file(), model: 'ctc', response_format: 'vtt' });
  t.match(vtt, new RegExp(`^WEBVTT\\n\\n00:00:00\\.\\d{3} --> 00:00:0\\d\\.\\d{3}\\n${TEXT}\\n$`));
});

t.test('stream: transcript.text.delta events, then transcript.text.done', async (t) => {
  const long = tones('ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE');
  const file = await toFile(encode(long.samples, 'ogg'), 'speech.ogg');
  const stream = await client.audio.transcriptions.create({ file, model: 'ctc', stream: true });
  const events: { type: string; delta?: string; text?: string }[] = [];
  for await (const event of stream) events.push(event);
  const deltas = events.filter((e) => e.type === 'transcript.text.delta');
  t.ok(deltas.length >= 2, `${deltas.length} deltas`);
  t.equal(events.at(-1)!.type, 'transcript.text.done');
  t.equal(deltas.map((d) => d.delta).join(''), events.at(-1)!.text);
  t.equal(events.at(-1)!.text, 'ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE TEN ELEVEN TWELVE');
});

t.test('stream: a long file that proves truncated is a 400 before any event', async (t) => {
  // About 25 s of tones cut at 80%: the first windows decode well before ffmpeg finds the end missing.
  const long = tones(Array.from({ length: 30 }, (_, i) => ['RIVER', 'STONE', 'GARDEN', 'WINDOW', 'MARKET'][i % 5]).join(' '));
  const flac = encode(long.samples, 'flac');
  const truncated = flac.subarray(0, Math.floor(flac.length * 0.8));
  const err = (await client.audio.transcriptions
    .create({ file: await toFile(truncated, 'long.flac'), model: 'ctc', stream: true })
    .then(async (stream) => {
      const events: unknown[] = [];
      for await (const event of stream) events.push(event);
      return { events };
    })
    .catch((e: unknown) => e)) as { status?: number; error?: { param: string; message: string }; events?: unknown[] };
  t.equal(err.events, undefined, 'no stream was opened');
  t.equal(err.status, 400);
  t.equal(err.error?.param, 'file');
  t.match(err.error?.message, /truncated/);
});

t.test('translations: an English CTC model answers its transcript', async (t) => {
  const file = await toFile(encode(signal.samples, 'mp3'), 'speech.mp3');
  const result = await client.audio.translations.create({ file, model: 'ctc' });
  t.equal(result.text, TEXT);
  const verbose = await client.audio.translations.create({
    file: await toFile(encode(signal.samples, 'mp3'), 'x.mp3'),
    model: 'ctc',
    response_format: 'verbose_json',
  });
  t.equal((verbose as unknown as { task: string }).task, 'translate');
});

t.test("espeak-ng's speech in every container: decoded and answered", async (t) => {
  const wav = speak('hello world');
  for (const container of Object.keys(CONTAINERS)) {
    const { samples, rate } = readWav(wav);
    const file = await toFile(encode(samples, container, { rate }), `hello.${container}`);
    const res = await client.audio.transcriptions.create({ file, model: 'ctc', response_format: 'verbose_json' }).catch((e: Error) => {
      t.fail(`${container}: ${e.message}`);
      return null;
    });
    if (!res) continue;
    t.ok(res.duration > 0.5 && res.duration < 2, `${container}: duration ${res.duration}`);
    t.type(res.text, 'string');
  }
});

t.test('400s in OpenAI shape', async (t) => {
  const bad = async (file: Buffer, model = 'ctc') => {
    const err = await client.audio.transcriptions.create({ file: await toFile(file, 'a.wav'), model }).catch((e: unknown) => e);
    return err as { status: number; error: { type: string; param: string | null; message: string } };
  };
  const empty = await bad(Buffer.alloc(0));
  t.equal(empty.status, 400);
  t.equal(empty.error.param, 'file');
  t.match(empty.error.message, /empty/);
  const wav = encode(signal.samples, 'wav');
  const truncated = await bad(wav.subarray(0, Math.floor(wav.length * 0.6)));
  t.equal(truncated.status, 400, 'truncated');
  t.match(truncated.error.message, /truncated/);
  const garbage = await bad(Buffer.from('this is not audio at all, only text'));
  t.equal(garbage.status, 400);
  t.equal(garbage.error.type, 'invalid_request_error');
  const notSpeech = await bad(wav, 'minilm');
  t.equal(notSpeech.status, 400);
  t.equal(notSpeech.error.param, 'model');
  t.match(notSpeech.error.message, /transcription/);
  // The model still answers after all that.
  const ok = await client.audio.transcriptions.create({ file: await toFile(wav, 'a.wav'), model: 'ctc' });
  t.equal(ok.text, TEXT);
});

t.test('counted in /metrics', async (t) => {
  const metrics = await (await app.fetch('/metrics')).text();
  t.match(metrics, /lia_model_requests_total\{[^}]*kind="transcribe"[^}]*\} \d+/);
});
