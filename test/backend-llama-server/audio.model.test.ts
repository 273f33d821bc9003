/**
 * Audio for a GGUF model that hears, on the tiny audio fixture (tiny-vision.gguf's language model
 * and an Ultravox-type audio projector, random weights: `npm run fixtures` builds them). The model
 * is created from two GGUFs, `/api/show` lists `audio` (and not `vision`), and llama-server runs
 * it with `--mmproj`. The output is random, so the tests check what a client can: each surface's
 * real client is answered, and the prompt grows by the encoder's tokens for the clip's length
 * (150 a 30 s window), so the clip reached the model, whatever container it came in (Ogg/Opus
 * and WebM, which llama.cpp cannot read itself, included). Transcription through such a model
 * answers every format, with a segment per window. Bad clips, audio to a model that does not
 * hear and audio in the wrong message are 400s in each surface's format.
 */
import OpenAI, { toFile } from 'openai';
import t from 'tap';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { TINY_AUDIO_TEXT_MODEL, tinyAudioTokens } from '../../scripts/fixtures/tiny-audio.js';
import { createModel, postJson, uploadBlob } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import { requireLlamaServer } from '../helpers/engines.js';
import { schemaCheckedFetch } from '../helpers/openai-schema.js';
import { encode, RATE, readWav, speak } from '../audio/signals.js';
import { solidPng } from './images.js';

requireLlamaServer();
const textModel = await builtFixture(TINY_AUDIO_TEXT_MODEL);
const projector = await builtFixture('tiny-audio-mmproj.gguf');
const visionProjector = await builtFixture('tiny-vision-mmproj.gguf');

const app = await startEngineAppliance({
  plugins: { 'api-openai': true },
  env: { LIA_THREADS: '1', LIA_NUM_PARALLEL: '1', LIA_CONTEXT_LENGTH: '1024' },
});
t.teardown(() => app.close());
// Every /v1/ answer is also checked against OpenAI's schemas.
const checked = schemaCheckedFetch(app.dispatcher());
const ollama = ollamaClient(app);
const openai = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: app.key, fetch: checked.fetch, maxRetries: 0 });
const backend = app.hooks.extensions
  .get('backends')
  .list()
  .find((b) => b.name === 'llama-server') as LlamaServerBackend;

const post = (route: string, body: unknown) => postJson(app, route, body);

// "hello world" as espeak-ng speaks it (22050 Hz WAV, about 1 s), and as Ogg/Opus and WebM.
const spoken = speak('hello world');
const { samples: voice, rate: voiceRate } = readWav(spoken);
const wav = spoken.toString('base64');
const ogg = encode(voice, 'ogg', { rate: voiceRate }).toString('base64');
const webm = encode(voice, 'webm', { rate: voiceRate }).toString('base64');
const mp3 = encode(voice, 'mp3', { rate: voiceRate }).toString('base64');
const seconds = voice.length / voiceRate;
// 40 s of 0.3 s tones with 0.2 s pauses: two of LIA's windows of 29.5 s at most, each one encoder window.
const long = new Float32Array(40 * RATE);
for (let i = 0; i < long.length; i++) long[i] = i % (RATE / 2) < 0.3 * RATE ? 0.3 * Math.sin((2 * Math.PI * 440 * i) / RATE) : 0;
const longWav = encode(long, 'wav');
const png = solidPng(32, 32).toString('base64');

await createModel(app, 'text', 'gguf/stories260K.gguf');

t.test('a model from a GGUF and its audio projector has the audio capability', async (t) => {
  const files = { 'tiny-vision.gguf': await uploadBlob(app, textModel), 'tiny-audio-mmproj.gguf': await uploadBlob(app, projector) };
  const created = await post('/api/create', { model: 'hearing', files, stream: false });
  t.equal(created.status, 200, JSON.stringify(created.json));
  const show = await post('/api/show', { model: 'hearing' });
  t.equal(show.status, 200);
  t.ok(show.json.capabilities.includes('audio'), `capabilities: ${show.json.capabilities}`);
  t.ok(show.json.capabilities.includes('completion'));
  t.notOk(show.json.capabilities.includes('vision'), 'an audio-only projector gives no vision');

  const seeing = { 'tiny-vision.gguf': files['tiny-vision.gguf'], 'tiny-vision-mmproj.gguf': await uploadBlob(app, visionProjector) };
  t.equal((await post('/api/create', { model: 'seeing', files: seeing, stream: false })).status, 200);
  const vision = await post('/api/show', { model: 'seeing' });
  t.ok(vision.json.capabilities.includes('vision'));
  t.notOk(vision.json.capabilities.includes('audio'), 'a vision projector gives no audio');
});

/** Prompt tokens of a turn with and without its clip, per surface, and the clip's length. */
const counts: Record<string, { plain: number; heard: number; seconds: number }> = {};

t.test('/v1/chat/completions takes input_audio parts in every container (openai client)', async (t) => {
  const ask = (data?: string, format: 'wav' | 'mp3' = 'wav') =>
    openai.chat.completions.create({
      model: 'hearing',
      max_tokens: 3,
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'What do you hear?' }, ...(data ? [{ type: 'input_audio' as const, input_audio: { data, format } }] : [])],
        },
      ],
    });
  const plain = (await ask()).usage!.prompt_tokens;
  const heard = await ask(wav);
  t.ok(heard.choices[0]?.message, 'answered');
  t.ok(
    backend.processes().some((p) => p.model === 'hearing:latest'),
    'the model runs on llama-server',
  );
  counts['openai wav'] = { plain, heard: heard.usage!.prompt_tokens, seconds };
  counts['openai mp3'] = { plain, heard: (await ask(mp3, 'mp3')).usage!.prompt_tokens, seconds };
  // Ogg and WebM (Opus): what a browser records; llama.cpp's own decoder reads neither.
  counts['openai ogg'] = { plain, heard: (await ask(ogg)).usage!.prompt_tokens, seconds };
  counts['openai webm'] = { plain, heard: (await ask(webm)).usage!.prompt_tokens, seconds };
  counts['openai 40 s'] = { plain, heard: (await ask(longWav.toString('base64'))).usage!.prompt_tokens, seconds: 40 };
});

t.test('/api/chat and /api/generate take a clip in images, as Ollama does, or in audio (ollama client)', async (t) => {
  const chat = (extra: Record<string, string[]> = {}) =>
    ollama.chat({ model: 'hearing', messages: [{ role: 'user', content: 'What do you hear?', ...extra }], options: { num_predict: 3 } });
  const plain = (await chat()).prompt_eval_count;
  const inImages = await chat({ images: [wav] });
  t.equal(inImages.done, true);
  counts['chat images'] = { plain, heard: inImages.prompt_eval_count, seconds };
  counts['chat images ogg'] = { plain, heard: (await chat({ images: [ogg] })).prompt_eval_count, seconds };
  const inAudio = await post('/api/chat', {
    model: 'hearing',
    messages: [{ role: 'user', content: 'What do you hear?', audio: [mp3] }],
    options: { num_predict: 3 },
    stream: false,
  });
  t.equal(inAudio.status, 200, JSON.stringify(inAudio.json));
  counts['chat audio'] = { plain, heard: inAudio.json.prompt_eval_count, seconds };

  const gen = (images?: string[]) => ollama.generate({ model: 'hearing', prompt: 'Describe', ...(images ? { images } : {}), options: { num_predict: 3 } });
  const gPlain = (await gen()).prompt_eval_count;
  counts['generate images'] = { plain: gPlain, heard: (await gen([wav])).prompt_eval_count, seconds };
});

t.test('on every surface the clip reached the model: the prompt grew by its encoder tokens', async (t) => {
  t.equal(Object.keys(counts).length, 9);
  for (const [surface, c] of Object.entries(counts)) {
    t.equal(c.heard - c.plain, tinyAudioTokens(c.seconds), `${surface}: ${c.plain} → ${c.heard} prompt tokens`);
  }
});

t.test('transcription and translation through a model that hears (openai client)', async (t) => {
  const file = await toFile(spoken, 'hello.wav', { type: 'audio/wav' });
  const json = await openai.audio.transcriptions.create({ model: 'hearing', file });
  t.type(json.text, 'string');
  const text = await openai.audio.transcriptions.create({ model: 'hearing', file: await toFile(spoken, 'hello.wav'), response_format: 'text' });
  t.equal(text.trim(), json.text.trim(), 'greedy: the same text in every format');

  const verbose = await openai.audio.transcriptions.create({
    model: 'hearing',
    file: await toFile(longWav, 'long.wav'),
    response_format: 'verbose_json',
    timestamp_granularities: ['segment', 'word'],
    language: 'de',
  });
  t.equal(verbose.language, 'german', "the client's language, which the model cannot detect");
  t.ok(Math.abs(verbose.duration - 40) < 0.1, `duration ${verbose.duration}`);
  const segments = verbose.segments ?? [];
  t.equal(segments.length, 2, 'one segment for each window of at most 29.5 s');
  t.equal(segments[0]?.start, 0);
  t.ok(segments[1]!.start >= 23.6 && segments[1]!.start <= 29.5, `the second window starts at ${segments[1]?.start}, where the first was cut`);
  t.equal(segments[1]?.end, 40);
  t.same(verbose.words, [], 'such a model times no words');
  t.equal(verbose.text, segments.map((s) => s.text).join(' '));

  const srt = await openai.audio.transcriptions.create({ model: 'hearing', file: await toFile(longWav, 'long.wav'), response_format: 'srt' });
  t.match(srt, /^1\n00:00:00,000 --> 00:00:2\d,\d{3}\n/);

  const stream = await openai.audio.transcriptions.create({ model: 'hearing', file: await toFile(longWav, 'long.wav'), stream: true });
  const events: string[] = [];
  for await (const e of stream) events.push(e.type);
  t.same(events, ['transcript.text.delta', 'transcript.text.delta', 'transcript.text.done']);

  const translation = await openai.audio.translations.create({ model: 'hearing', file: await toFile(spoken, 'hello.wav'), response_format: 'verbose_json' });
  t.equal((translation as { language?: string }).language, 'english');
  t.type(translation.text, 'string');
});

t.test("audio a model cannot hear, bad clips and audio in the wrong place are 400s in each surface's format", async (t) => {
  const v1 = (model: string, content: unknown, role = 'user') => post('/v1/chat/completions', { model, max_tokens: 2, messages: [{ role, content }] });
  const part = (data: string) => [
    { type: 'text', text: 'x' },
    { type: 'input_audio', input_audio: { data, format: 'wav' } },
  ];

  const deaf = await v1('text', part(wav));
  t.equal(deaf.status, 400);
  t.match(deaf.json, { error: { type: 'invalid_request_error', param: 'model', message: /does not support audio/ } });
  const seeing = await post('/api/chat', { model: 'seeing', messages: [{ role: 'user', content: 'x', images: [wav] }], stream: false });
  t.equal(seeing.status, 400, 'a WAV in images to a vision model');
  t.match(seeing.json, { error: /does not support audio/ });
  const picture = await post('/api/chat', { model: 'hearing', messages: [{ role: 'user', content: 'x', images: [png] }], stream: false });
  t.equal(picture.status, 400, 'an image to a model that only hears');
  t.match(picture.json, { error: /does not support vision/ });

  const garbage = await v1('hearing', part(Buffer.from('this is not audio at all, only some words').toString('base64')));
  t.equal(garbage.status, 400);
  t.match(garbage.json, { error: { param: 'messages[0]', message: /not in a format LIA decodes/ } });
  const notBase64 = await v1('hearing', part('%%% not base64 %%%'));
  t.equal(notBase64.status, 400);
  t.match(notBase64.json, { error: { message: /not valid base64/ } });
  const empty = await v1('hearing', part(''));
  t.equal(empty.status, 400);
  t.match(empty.json, { error: { message: /empty/ } });
  const truncated = await v1(
    'hearing',
    part(
      Buffer.from(encode(voice, 'mp4', { rate: voiceRate }))
        .subarray(0, 2000)
        .toString('base64'),
    ),
  );
  t.equal(truncated.status, 400, 'a truncated MP4');
  const system = await v1('hearing', part(wav), 'system');
  t.equal(system.status, 400);
  t.match(system.json, { error: { message: /audio only in user messages/ } });
  const ollamaBad = await post('/api/chat', { model: 'hearing', messages: [{ role: 'user', content: 'x', audio: ['AAAA'] }], stream: false });
  t.equal(ollamaBad.status, 400);
  t.match(ollamaBad.json, { error: /not in a format LIA decodes|holds no audio/ });

  const transcribeDeaf = await openai.audio.transcriptions.create({ model: 'text', file: await toFile(spoken, 'a.wav') }).catch((e: unknown) => e);
  t.match(transcribeDeaf, { status: 400, error: { param: 'model', message: /does not support transcription/ } });

  const after = await ollama.chat({ model: 'hearing', messages: [{ role: 'user', content: 'still there?', images: [wav] }], options: { num_predict: 2 } });
  t.equal(after.done, true, 'the model still answers');
});

t.test("the openai client's answers conform to OpenAI's schemas", async (t) => {
  const { failures, checked: n } = await checked.drain();
  t.same(failures, []);
  t.ok(n >= 6, `${n} payloads validated (the chat completions at least)`);
});
