/**
 * Moonshine end to end over the real HTTPS API with the official `openai` client: the designed
 * `tiny-moonshine` fixture (npm run fixtures; a MoonshineForConditionalGeneration ONNX folder
 * whose encoder hears a word as a tone of its own frequency) created through `/api/blobs` +
 * `/api/create`, shown with the `transcription` capability, and asked through
 * `audio.transcriptions.create` and `audio.translations.create`: the words of the tones, a
 * window one segment, a longer file cut into 30 s windows, and what Moonshine cannot do (a
 * language, a translation) answered with its transcript.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { toFile } from 'openai';
import t from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture } from '../api-openai/openai-client.js';
import { encode, wordTones } from './signals.js';

const folder = await builtFixture('tiny-moonshine');
const design = JSON.parse(await readFile(path.join(folder, 'design.json'), 'utf8')) as { words: Record<string, number> };
const fx = await openaiFixture(t, { moonshine: folder });
const { app, client } = fx;

const WORDS = ['hello', 'world', 'cat', 'dog', 'one'];
const speech = wordTones(design.words, WORDS);

type Verbose = { task: string; language: string; text: string; segments: { start: number; end: number; text: string; seek: number }[] };

t.test('shown with the transcription capability, family moonshine', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'moonshine' }) });
  const show = (await res.json()) as { capabilities: string[]; details: { family: string; format: string } };
  t.same(show.capabilities, ['transcription']);
  t.equal(show.details.family, 'moonshine');
  t.equal(show.details.format, 'onnx');
});

for (const container of ['wav', 'flac', 'mp3', 'ogg']) {
  t.test(`the words of the tones from ${container}`, async (t) => {
    const result = await client.audio.transcriptions.create({
      file: await toFile(encode(speech.samples, container), `speech.${container}`),
      model: 'moonshine',
    });
    t.equal(result.text, WORDS.join(' '));
  });
}

t.test('verbose_json: the window is one segment; a language is ignored, as Moonshine has one', async (t) => {
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(speech.samples, 'wav'), 'speech.wav'),
    model: 'moonshine',
    response_format: 'verbose_json',
    language: 'de',
  })) as unknown as Verbose;
  t.equal(verbose.text, WORDS.join(' '));
  t.equal(verbose.language, 'german', 'the hint echoed');
  t.equal(verbose.segments.length, 1);
  t.equal(verbose.segments[0]!.text, WORDS.join(' '));
  t.equal(verbose.segments[0]!.start, 0);
});

t.test('translations: Moonshine cannot translate and answers its transcript', async (t) => {
  const result = await client.audio.translations.create({ file: await toFile(encode(speech.samples, 'm4a'), 'speech.m4a'), model: 'moonshine' });
  t.equal(result.text, WORDS.join(' '));
});

t.test('longer than the 30 s window: cut, each window its segment', async (t) => {
  const words = Array.from({ length: 60 }, (_, i) => Object.keys(design.words)[i % 8]!);
  const long = wordTones(design.words, words);
  t.ok(long.samples.length / 16000 > 33, `${long.samples.length / 16000} s`);
  const verbose = (await client.audio.transcriptions.create({
    file: await toFile(encode(long.samples, 'flac'), 'long.flac'),
    model: 'moonshine',
    response_format: 'verbose_json',
  })) as unknown as Verbose;
  t.equal(verbose.text, words.join(' '));
  t.equal(verbose.segments.length, 2);
  t.equal(verbose.segments[0]!.seek, 0);
  t.ok(verbose.segments[1]!.seek / 16000 > 24 && verbose.segments[1]!.seek / 16000 <= 30, `the second window at ${verbose.segments[1]!.seek / 16000} s`);
  t.ok(Math.abs(verbose.segments[1]!.start - verbose.segments[1]!.seek / 16000) < 0.001, 'timed from its window');
});

t.test('silence: no text', async (t) => {
  const result = await client.audio.transcriptions.create({ file: await toFile(encode(new Float32Array(32000), 'wav'), 'quiet.wav'), model: 'moonshine' });
  t.equal(result.text, '');
});
