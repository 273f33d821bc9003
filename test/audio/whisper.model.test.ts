/**
 * Whisper end to end over the real HTTPS API with the official `openai` client: the designed
 * `tiny-whisper` fixture (npm run fixtures; a WhisperForConditionalGeneration ONNX folder whose
 * encoder hears a word as a tone, the band naming the word and its language) created through
 * `/api/blobs` + `/api/create` and with `lia create` from the folder, shown with the
 * `transcription` capability, and asked through `audio.transcriptions.create` and
 * `audio.translations.create`. What it must answer follows from the tones: the language it
 * detects (the bands' language) and reports, the words in the hinted language when one is
 * given, English words for a translation, one segment per word timed where its tone sounds,
 * across the 30 s windows of a longer file.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { toFile } from 'openai';
import t, { type Test } from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture } from '../api-openai/openai-client.js';
import { ROOT } from '../helpers/fixtures.js';
import { encode, wordTones, type PlacedWord } from './signals.js';

const folder = await builtFixture('tiny-whisper');
const design = JSON.parse(await readFile(path.join(folder, 'design.json'), 'utf8')) as {
  words: Record<string, Record<string, number>>;
  translations: Record<string, Record<string, string>>;
};
const fx = await openaiFixture(t, { whisper: folder, minilm: 'onnx/tiny-random-minilm' });
const { app, client } = fx;

const GERMAN = ['eins', 'zwei', 'katze', 'hund'];
const german = wordTones(design.words['de']!, GERMAN);
const english = (words: string[], from: string) => words.map((w) => design.translations[from]![w]!);
const french = (words: string[], from: string) =>
  english(words, from).map((w) => Object.keys(design.translations['fr']!).find((f) => design.translations['fr']![f] === w)!);

type Verbose = {
  task: string;
  language: string;
  duration: number;
  text: string;
  segments: { start: number; end: number; text: string; seek: number; tokens: number[] }[];
};

/** Each segment holds one word, timed where its tone sounds (the end one 20 ms frame past the tone, as the spectrogram's window reaches). */
function timedAsTones(t: Test, segments: Verbose['segments'], placed: PlacedWord[], texts: string[]) {
  t.same(
    segments.map((s) => s.text),
    texts,
    'one segment per word',
  );
  segments.forEach((s, i) => {
    const want = placed[i];
    if (!want || Math.abs(s.start - want.start) > 0.06 || Math.abs(s.end - want.end) > 0.06) {
      t.fail(`segment ${i} "${s.text}" ${s.start}-${s.end} vs the tone at ${want?.start}-${want?.end}`);
    }
  });
}

t.test('shown with the transcription capability, family whisper', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'whisper' }) });
  const show = (await res.json()) as { capabilities: string[]; details: { family: string; format: string; parameter_size: string } };
  t.same(show.capabilities, ['transcription']);
  t.equal(show.details.family, 'whisper');
  t.equal(show.details.format, 'onnx');
  t.not(show.details.parameter_size, '', 'counted from both graphs');
});

t.test('lia create -f Modelfile with FROM ./folder, then transcribed', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-whisper-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await symlink(folder, path.join(dir, 'whisper-folder'));
  await writeFile(path.join(dir, 'Modelfile'), 'FROM ./whisper-folder\n');
  await writeFile(path.join(dir, 'ca.pem'), app.ca);
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), 'create', 'whisper-cli', '-f', path.join(dir, 'Modelfile')], {
    cwd: dir,
    env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: path.join(dir, 'ca.pem') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, out);
  const result = await client.audio.transcriptions.create({ file: await toFile(encode(german.samples, 'wav'), 'de.wav'), model: 'whisper-cli' });
  t.equal(result.text, GERMAN.join(' '));
});

t.test('the language is detected from the audio and reported in verbose_json', async (t) => {
  for (const [code, name, words] of [
    ['de', 'german', GERMAN],
    ['en', 'english', ['one', 'two', 'three', 'four']],
    ['fr', 'french', ['bonjour', 'monde', 'chat']],
  ] as const) {
    const { samples } = wordTones(design.words[code]!, [...words]);
    const json = await client.audio.transcriptions.create({ file: await toFile(encode(samples, 'flac'), `${code}.flac`), model: 'whisper' });
    t.equal(json.text, words.join(' '), `${code}: the words of the tones`);
    const verbose = (await client.audio.transcriptions.create({
      file: await toFile(encode(samples, 'mp3'), `${code}.mp3`),
      model: 'whisper',
      response_format: 'verbose_json',
    })) as unknown as Verbose;
    t.equal(verbose.language, name, `${code}: detected`);
    t.equal(verbose.task, 'transcribe');
    t.equal(verbose.text, words.join(' '));
  }
});

t.test('verbose_json: a segment per word, timed by the timestamp tokens', async (t) => {
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(german.samples, 'wav'), 'de.wav'),
    model: 'whisper',
    response_format: 'verbose_json',
    timestamp_granularities: ['segment'],
  })) as unknown as Verbose;
  timedAsTones(t, verbose.segments, german.words, GERMAN);
  t.ok(
    verbose.segments.every((s) => s.seek === 0 && s.tokens.length === 1),
    'in the first window, one token each',
  );
  t.ok(Math.abs(verbose.duration - german.samples.length / 16000) < 0.05, `duration ${verbose.duration}`);
});

t.test('a language hint is honoured: the words written in that language', async (t) => {
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(german.samples, 'wav'), 'de.wav'),
    model: 'whisper',
    language: 'fr',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.text, french(GERMAN, 'de').join(' '));
  t.equal(verbose.language, 'french');
  const hinted = await client.audio.transcriptions.create({ file: await toFile(encode(german.samples, 'wav'), 'de.wav'), model: 'whisper', language: 'EN' });
  t.equal(hinted.text, 'one two cat dog');
});

t.test('translations: English text, task translate', async (t) => {
  const json = await client.audio.translations.create({ file: await toFile(encode(german.samples, 'ogg'), 'de.ogg'), model: 'whisper' });
  t.equal(json.text, english(GERMAN, 'de').join(' '));
  t.equal(json.text, 'one two cat dog');
  const verbose = (await client.audio.translations.create({
    file: await toFile(encode(german.samples, 'm4a'), 'de.m4a'),
    model: 'whisper',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.task, 'translate');
  t.equal(verbose.language, 'english', "a translation's text is English, as OpenAI reports");
  timedAsTones(t, verbose.segments, german.words, ['one', 'two', 'cat', 'dog']);
});

t.test('longer than the 30 s window: chunked, segments timed across the windows', async (t) => {
  const words = Array.from({ length: 72 }, (_, i) => Object.keys(design.words['fr']!)[i % 8]!);
  const long = wordTones(design.words['fr']!, words);
  t.ok(long.samples.length / 16000 > 38, `${long.samples.length / 16000} s`);
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(long.samples, 'flac'), 'long.flac'),
    model: 'whisper',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.text, words.join(' '));
  t.equal(verbose.language, 'french');
  timedAsTones(t, verbose.segments, long.words, words);
  const seeks = [...new Set(verbose.segments.map((s) => s.seek))];
  t.equal(seeks.length, 2, `two windows: ${JSON.stringify(seeks)}`);
  t.ok(seeks[1]! / 16000 > 24 && seeks[1]! / 16000 <= 30, `the second window starts in the first's last fifth, at ${seeks[1]! / 16000} s`);
  const srt = await client.audio.transcriptions.create({
    file: await toFile(encode(long.samples, 'flac'), 'long.flac'),
    model: 'whisper',
    response_format: 'srt',
  });
  t.equal(srt.trim().split('\n\n').length, words.length, 'an srt cue per segment');
  t.match(srt, /\n00:00:3\d,\d{3} --> 00:00:3\d,\d{3}\n/, 'cues past 30 s');
});

t.test("the first window's language holds for the file, as Whisper's transcribe keeps it", async (t) => {
  // 28 s of German, then English: the second window is written in German.
  const de = Array.from({ length: 50 }, (_, i) => GERMAN[i % 4]!);
  const en = ['one', 'two', 'cat', 'dog'];
  const first = wordTones(design.words['de']!, de);
  const second = wordTones(design.words['en']!, en, { lead: 0.3 });
  const samples = new Float32Array(first.samples.length + second.samples.length);
  samples.set(first.samples);
  samples.set(second.samples, first.samples.length);
  t.ok(first.samples.length / 16000 > 27.5, `${first.samples.length / 16000} s of German`);
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(samples, 'wav'), 'mixed.wav'),
    model: 'whisper',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.language, 'german');
  t.equal(verbose.text, [...de, ...GERMAN].join(' '));
});

t.test('stream: a delta per segment, then the whole text', async (t) => {
  const stream = await client.audio.transcriptions.create({ file: await toFile(encode(german.samples, 'webm'), 'de.webm'), model: 'whisper', stream: true });
  const events: { type: string; delta?: string; text?: string }[] = [];
  for await (const event of stream) events.push(event);
  const deltas = events.filter((e) => e.type === 'transcript.text.delta');
  t.same(
    deltas.map((d) => d.delta),
    ['eins', ' zwei', ' katze', ' hund'],
  );
  t.equal(events.at(-1)!.type, 'transcript.text.done');
  t.equal(events.at(-1)!.text, GERMAN.join(' '));
});

t.test('silence: no text, no segments', async (t) => {
  const quiet = new Float32Array(3 * 16000);
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(quiet, 'wav'), 'quiet.wav'),
    model: 'whisper',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.text, '');
  t.same(verbose.segments, []);
});

t.test('refusals in OpenAI shape', async (t) => {
  const refuse = async (params: Record<string, unknown>) => {
    const err = await client.audio.transcriptions
      .create({ file: await toFile(encode(german.samples, 'wav'), 'de.wav'), model: 'whisper', ...params })
      .catch((e: unknown) => e);
    return err as { status: number; error: { type: string; param: string | null; message: string } };
  };
  const unknown = await refuse({ language: 'sw' });
  t.equal(unknown.status, 400, 'a language the model lacks');
  t.equal(unknown.error.param, 'language');
  t.match(unknown.error.message, /"sw" is not one this model transcribes/);
  const malformed = await refuse({ language: 'not a language' });
  t.equal(malformed.status, 400);
  t.equal(malformed.error.param, 'language');
  const empty = (await client.audio.transcriptions.create({ file: await toFile(Buffer.alloc(0), 'a.wav'), model: 'whisper' }).catch((e: unknown) => e)) as {
    status: number;
    error: { param: string };
  };
  t.equal(empty.status, 400);
  t.equal(empty.error.param, 'file');
  const garbage = (await client.audio.transcriptions
    .create({ file: await toFile(Buffer.from('this is not audio at all, only text'), 'a.wav'), model: 'whisper' })
    .catch((e: unknown) => e)) as { status: number; error: { type: string } };
  t.equal(garbage.status, 400);
  t.equal(garbage.error.type, 'invalid_request_error');
  const notSpeech = await refuse({ model: 'minilm' });
  t.equal(notSpeech.status, 400);
  t.equal(notSpeech.error.param, 'model');
  t.match(notSpeech.error.message, /transcription/);
  // The model still answers after all that.
  const ok = await client.audio.transcriptions.create({ file: await toFile(encode(german.samples, 'wav'), 'de.wav'), model: 'whisper' });
  t.equal(ok.text, GERMAN.join(' '));
});

t.test('counted in /metrics; the refusals conform to the OpenAI error schema', async (t) => {
  const metrics = await (await app.fetch('/metrics')).text();
  t.match(metrics, /lia_model_requests_total\{[^}]*model="whisper[^"]*"[^}]*kind="transcribe"[^}]*\} \d+/);
  await fx.conforms(t);
});
