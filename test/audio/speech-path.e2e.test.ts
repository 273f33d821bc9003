/**
 * What LIA hands a speech model is the audio the client sent: espeak-ng's "hello world",
 * encoded by ffmpeg into every container OpenAI accepts at rates other than the model's, is
 * uploaded with the `openai` client to the fake backend's speech model, which reads out the
 * RMS level of every 100 ms it was given. That envelope must follow the one computed here from
 * espeak-ng's own samples (correlation above 0.95), and must not follow another sentence's or
 * the same one's shifted by 300 ms, so the test cannot pass on silence, noise or misplaced audio.
 * Long audio is handed over in windows whose times add up to the file's.
 */
import OpenAI, { toFile } from 'openai';
import t from 'tap';
import { createSpeechModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { schemaCheckedFetch } from '../helpers/openai-schema.js';
import { correlation, CONTAINERS, encode, envelope, readWav, speak } from './signals.js';

const app = await startTestAppliance({
  plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false, 'fake-backend': FAKE_BACKEND },
});
t.teardown(() => app.close());
await createSpeechModel(app, 'ears', 30);
await createSpeechModel(app, 'short-ears', 2);
const client = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: app.key, fetch: schemaCheckedFetch(app.dispatcher()).fetch, maxRetries: 0 });

const hello = readWav(speak('hello world'));
const other = readWav(speak('seven quick zebras jump over a fence'));
const reference = envelope(hello.samples, hello.rate);

async function heard(samples: Float32Array, rate: number, container: string, model = 'ears') {
  const file = await toFile(encode(samples, container, { rate }), `speech.${container}`);
  return client.audio.transcriptions.create({ file, model, response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'] });
}

for (const container of Object.keys(CONTAINERS)) {
  t.test(`${container}: the model gets the spoken audio`, async (t) => {
    const res = await heard(hello.samples, hello.rate, container);
    const levels = res.words!.map((w) => Number(w.word));
    // Lossy encoders add up to a few tens of ms of priming; the envelope is aligned on its onset.
    const onset = (xs: number[]) => xs.findIndex((x) => x > 20);
    const got = levels.slice(onset(levels));
    const want = reference.slice(onset(reference));
    const r = correlation(got, want);
    t.ok(r > 0.95, `correlation with the spoken audio ${r.toFixed(3)}`);
    t.ok(correlation(got, envelope(other.samples, other.rate)) < 0.6, 'another sentence does not match');
    t.ok(correlation(got.slice(3), want) < 0.8, 'nor the same one 300 ms off');
    t.ok(Math.abs(res.duration - hello.samples.length / hello.rate) < 0.1, `duration ${res.duration}`);
  });
}

t.test('long audio reaches the model in windows whose times add up', async (t) => {
  // 5.2 s of the sentence repeated, in 2 s windows.
  const long = new Float32Array(hello.samples.length * 5);
  for (let i = 0; i < 5; i++) long.set(hello.samples, i * hello.samples.length);
  const res = await heard(long, hello.rate, 'flac', 'short-ears');
  t.ok(res.segments!.length >= 3, `${res.segments!.length} windows`);
  const words = res.words!;
  for (let i = 1; i < words.length; i++)
    if (Math.abs(words[i]!.start - words[i - 1]!.end) > 1e-6 && words[i]!.start < words[i - 1]!.end) t.fail(`overlap at ${i}`);
  t.ok(Math.abs(words.at(-1)!.end - long.length / hello.rate) < 0.1, `last word ends at ${words.at(-1)!.end}`);
  t.ok(
    correlation(
      words.map((w) => Number(w.word)),
      envelope(long, hello.rate),
    ) > 0.9,
    'and is still the spoken audio',
  );
});

t.test('fields newer than LIA are accepted', async (t) => {
  const file = await toFile(encode(hello.samples, 'wav', { rate: hello.rate }), 'a.wav');
  const res = await client.audio.transcriptions.create({
    file,
    model: 'ears',
    include: ['logprobs'],
    chunking_strategy: 'auto',
    known_speaker_names: ['a'],
    // @ts-expect-error a field newer than this client
    some_future_field: 'x',
  });
  t.type(res.text, 'string');
});

t.test('an undecodable file is a 400, and the appliance keeps answering', async (t) => {
  const err = (await client.audio.transcriptions
    .create({ file: await toFile(Buffer.from('#EXTM3U\n#EXTINF:1,\n/etc/hostname\n'), 'list.m3u8'), model: 'ears' })
    .catch((e: unknown) => e)) as {
    status: number;
    error: { param: string };
  };
  t.equal(err.status, 400, 'a playlist is not opened');
  t.equal(err.error.param, 'file');
  const ok = await heard(hello.samples, hello.rate, 'wav');
  t.ok(ok.words!.length > 5);
});
