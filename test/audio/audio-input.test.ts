/**
 * The engine's audio for models that hear (plugins/engine/audio-input.ts), without a model: which
 * base64 files are audio (Ollama's clips in `images`), and what a clip becomes for the backend, a
 * 16 kHz mono WAV of the same sound, from every container, with the 400s for bad clips.
 */
import t from 'tap';
import { isAppError } from '../../core/errors.js';
import { AUDIO_INPUT_RATE, checkAudio, looksLikeAudio } from '../../plugins/engine/audio-input.js';
import { DEFAULT_DECODE_TIMEOUT_MS } from '../../plugins/engine/audio.js';
import type { ResolvedModel } from '../../plugins/model-store/public.js';
import { imageHeader, solidPng } from '../backend-llama-server/images.js';
import { CONTAINERS, correlation, encode, envelope, readWav, speak } from './signals.js';

const hearing = { name: 'hearing:latest', capabilities: ['completion', 'audio'] } as unknown as ResolvedModel;
const deaf = { name: 'text:latest', capabilities: ['completion', 'vision'] } as unknown as ResolvedModel;
const limits = { maxSeconds: 60, timeoutMs: DEFAULT_DECODE_TIMEOUT_MS };
const spoken = speak('the quick brown fox jumps over the lazy dog');
const original = readWav(spoken);

t.test('audio files are told from images by their signature', async (t) => {
  t.ok(looksLikeAudio(spoken.toString('base64')), "espeak-ng's WAV");
  for (const container of Object.keys(CONTAINERS)) {
    const file = encode(original.samples, container, { rate: original.rate }).toString('base64');
    t.ok(looksLikeAudio(file), container);
    t.ok(looksLikeAudio(`data:audio/${container};base64,${file}`), `${container} as a data: URL`);
  }
  t.notOk(looksLikeAudio(solidPng(8, 8).toString('base64')), 'png');
  for (const format of ['gif', 'bmp', 'webp', 'jpeg'] as const) t.notOk(looksLikeAudio(imageHeader(format, 8, 8).toString('base64')), format);
  t.notOk(looksLikeAudio(Buffer.from('plain text').toString('base64')), 'text');
});

t.test('a clip in any container becomes a 16 kHz mono WAV of the same sound', async (t) => {
  const reference = envelope(original.samples, original.rate);
  for (const container of ['wav', 'ogg', 'webm', 'mp3', 'm4a', 'flac']) {
    const file = container === 'wav' ? spoken : encode(original.samples, container, { rate: original.rate });
    const [clip] = await checkAudio(hearing, 'hearing', [file.toString('base64')], limits, 'messages[0]');
    const wav = readWav(Buffer.from(clip!, 'base64'));
    t.equal(wav.rate, AUDIO_INPUT_RATE, `${container}: 16 kHz`);
    const seconds = wav.samples.length / wav.rate;
    t.ok(Math.abs(seconds - original.samples.length / original.rate) < 0.1, `${container}: ${seconds.toFixed(2)} s`);
    const r = correlation(envelope(wav.samples, wav.rate), reference);
    t.ok(r > 0.95, `${container}: its level over time follows the original's (r = ${r.toFixed(3)})`);
  }
  t.same(await checkAudio(deaf, 'text', [], limits, 'messages[0]'), [], 'no clips: nothing asked of the model');
});

t.test('bad clips and a model that does not hear are 400s naming the field', async (t) => {
  const refused = async (model: ResolvedModel, clip: unknown, param: string, message: RegExp, what: string) => {
    const err = await checkAudio(model, 'm', [clip as string], { ...limits, maxSeconds: 1 }, 'messages[2]').then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(isAppError(err) && err.statusCode === 400, `${what}: a 400`);
    t.match(err, { param, message }, what);
  };
  await refused(deaf, spoken.toString('base64'), 'model', /does not support audio/, 'a model without audio');
  await refused(hearing, '', 'messages[2]', /empty/, 'an empty clip');
  await refused(hearing, '@@@', 'messages[2]', /not valid base64/, 'not base64');
  await refused(hearing, 42, 'messages[2]', /base64 text/, 'not a string');
  await refused(hearing, Buffer.from('no audio in here at all').toString('base64'), 'messages[2]', /not in a format LIA decodes/, 'not audio');
  await refused(hearing, spoken.toString('base64'), 'messages[2]', /longer than 1 s/, 'over maxAudioSeconds');
});
