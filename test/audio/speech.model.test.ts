/**
 * Text to speech end to end over the real HTTPS API with the official `openai` client: the
 * designed `tiny-vits` fixture (npm run fixtures) created through `/api/blobs` + `/api/create`,
 * shown with the `speech` capability and its voices, and asked through `audio.speech.create`.
 * Every `response_format` is audio ffprobe reads at 24 kHz mono, and transcribed by LIA with
 * `tiny-ctc` it is the input text again; the SSE stream carries the same audio; a four-sentence
 * input starts with its first sentence; a client that leaves mid-stream leaves no ffmpeg behind.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { toFile } from 'openai';
import t from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture } from '../api-openai/openai-client.js';
import { encode, fromPcm16, probe, rms } from './signals.js';

const fx = await openaiFixture(t, { vits: await builtFixture('tiny-vits'), ctc: await builtFixture('tiny-ctc'), minilm: 'onnx/tiny-random-minilm' });
const { app, client } = fx;

const TEXT = "HELLO WORLD IT'S LIA";
const FOUR = 'ONE TWO. THREE FOUR! FIVE SIX? SEVEN EIGHT.';
const FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
type Format = (typeof FORMATS)[number];
const EXPECTED: Record<Format, { codec: string; rate: number; type: string }> = {
  mp3: { codec: 'mp3', rate: 24000, type: 'audio/mpeg' },
  // Opus decodes at 48 kHz whatever rate it was encoded from.
  opus: { codec: 'opus', rate: 48000, type: 'audio/ogg' },
  aac: { codec: 'aac', rate: 24000, type: 'audio/aac' },
  flac: { codec: 'flac', rate: 24000, type: 'audio/flac' },
  wav: { codec: 'pcm_s16le', rate: 24000, type: 'audio/wav' },
  pcm: { codec: 'pcm_s16le', rate: 24000, type: 'audio/pcm' },
};

async function speak(input: string, extra: Partial<Parameters<typeof client.audio.speech.create>[0]> = {}): Promise<{ bytes: Buffer; type: string | null }> {
  const res = await client.audio.speech.create({ model: 'vits', voice: 'alloy', input, ...extra });
  return { bytes: Buffer.from(await res.arrayBuffer()), type: res.headers.get('content-type') };
}

/** What tiny-ctc hears in `bytes` (raw PCM is put in a WAV first). */
async function transcribe(bytes: Buffer, format: Format): Promise<string> {
  const file = format === 'pcm' ? encode(fromPcm16(bytes), 'wav', { rate: 24000, outRate: 24000 }) : bytes;
  return (await client.audio.transcriptions.create({ file: await toFile(file, `speech.${format === 'opus' ? 'ogg' : format}`), model: 'ctc' })).text;
}

/** The ffmpeg processes this test's process started (the appliance runs in it). */
function ffmpegChildren(): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(readFileSync(`/proc/${entry}/stat`, 'utf8'));
      if (m && m[1] === 'ffmpeg' && Number(m[2]) === process.pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The SSE events of a body. */
function events(text: string): { type: string; audio?: string; usage?: { input_tokens: number; output_tokens: number; total_tokens: number } }[] {
  return text
    .split('\n\n')
    .filter((frame) => frame.includes('data: '))
    .map((frame) => {
      const name = /^event: (.*)$/m.exec(frame)?.[1];
      const data = JSON.parse(/^data: (.*)$/m.exec(frame)![1]!) as { type: string };
      if (name !== data.type) throw new Error(`event ${name} carries ${data.type}`);
      return data;
    });
}

t.test('shown with the speech capability and its voices', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'vits' }) });
  const show = (await res.json()) as { capabilities: string[]; voices: string[]; details: { family: string; format: string } };
  t.same(show.capabilities, ['speech']);
  t.same(show.voices, ['loud', 'quiet']);
  t.equal(show.details.family, 'vits');
  t.equal(show.details.format, 'onnx');
  const models = (await client.models.list()).data.map((m) => m.id);
  t.ok(
    models.some((id) => id.startsWith('vits')),
    'listed in /v1/models like any model',
  );
});

for (const format of FORMATS) {
  t.test(`${format}: audio at the expected rate that transcribes back to the input`, async (t) => {
    const { bytes, type } = await speak(TEXT, { response_format: format });
    t.equal(type, EXPECTED[format].type);
    const probed = probe(bytes, format === 'pcm' ? ['-f', 's16le', '-ar', '24000', '-ac', '1'] : undefined);
    t.same(probed, { codec: EXPECTED[format].codec, rate: EXPECTED[format].rate, channels: 1 });
    t.equal(await transcribe(bytes, format), TEXT);
  });
}

t.test('mp3 by default', async (t) => {
  const { bytes, type } = await speak(TEXT);
  t.equal(type, 'audio/mpeg');
  t.equal(probe(bytes).codec, 'mp3');
});

t.test("voices: the model's own, OpenAI's mapped in turn; instructions accepted", async (t) => {
  const loud = (await speak(TEXT, { voice: 'loud', response_format: 'pcm' })).bytes;
  const quiet = (await speak(TEXT, { voice: 'quiet', response_format: 'pcm' })).bytes;
  const ratio = rms(fromPcm16(loud)) / rms(fromPcm16(quiet));
  t.ok(ratio > 2.2 && ratio < 2.8, `loud is 0.3, quiet 0.12: ratio ${ratio}`);
  t.same((await speak(TEXT, { voice: 'alloy', response_format: 'pcm' })).bytes, loud, 'alloy: the first voice');
  t.same((await speak(TEXT, { voice: 'ash', response_format: 'pcm' })).bytes, quiet, 'ash: the second');
  t.same((await speak(TEXT, { voice: { id: 'quiet' }, response_format: 'pcm' })).bytes, quiet, 'a voice object by its id');
  t.same((await speak(TEXT, { voice: 'loud', response_format: 'pcm', instructions: 'Whisper it, sadly.' })).bytes, loud, 'VITS ignores instructions');
});

t.test('speed stretches the audio, pitch kept', async (t) => {
  const length = async (speed: number) => (await speak(TEXT, { response_format: 'pcm', speed })).bytes.length / 2;
  const normal = await length(1);
  for (const speed of [0.25, 0.5, 2, 4]) {
    const ratio = (await length(speed)) / normal;
    t.ok(Math.abs(ratio * speed - 1) < 0.05, `speed ${speed}: ${ratio.toFixed(3)} of the length`);
  }
});

t.test('sse: delta events with the audio, then done with the usage', async (t) => {
  const res = await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: FOUR, response_format: 'pcm', stream_format: 'sse' });
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const all = events(await res.text());
  const deltas = all.filter((e) => e.type === 'speech.audio.delta');
  t.ok(deltas.length >= 2, `${deltas.length} deltas`);
  t.same(
    all.map((e) => e.type),
    [...deltas.map(() => 'speech.audio.delta'), 'speech.audio.done'],
    'deltas, then one done, last',
  );
  const pcm = Buffer.concat(deltas.map((d) => Buffer.from(d.audio!, 'base64')));
  t.same(pcm, (await speak(FOUR, { response_format: 'pcm' })).bytes, 'the same audio as stream_format "audio"');
  t.equal(await transcribe(pcm, 'pcm'), 'ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT');
  const usage = all.at(-1)!.usage!;
  t.ok(usage.input_tokens > FOUR.length, `${usage.input_tokens} input tokens (a character and a blank each, at least)`);
  t.equal(usage.output_tokens, Math.ceil((pcm.length / 2 / 24000) * 20), '20 a second of audio');
  t.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
});

t.test('four sentences: the body streams, and starts with the first sentence', async (t) => {
  const res = await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: FOUR, response_format: 'pcm' });
  const reader = res.body!.getReader();
  const chunks: Uint8Array[] = [];
  for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
  t.ok(chunks.length >= 2, `${chunks.length} chunks`);
  const pcm = Buffer.concat(chunks);
  // "ONE TWO." is 17 tokens of 60 ms (the delimiter, 7 characters and their blanks, the delimiter): 1.02 s.
  const first = pcm.subarray(0, Math.round(17 * 0.06 * 24000) * 2);
  t.equal(await transcribe(Buffer.from(first), 'pcm'), 'ONE TWO', 'the first sentence comes first');
  t.equal(await transcribe(pcm, 'pcm'), 'ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT', 'then the others, in order');
});

t.test('400s in OpenAI shape', async (t) => {
  const bad = (body: Record<string, unknown>) =>
    client.audio.speech.create({ model: 'vits', voice: 'alloy', input: TEXT, ...body }).then(
      () => null,
      (e: unknown) => e as { status: number; error: { type: string; param: string | null; message: string } },
    );
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ voice: 'bass' }, 'voice', /loud, quiet/],
    [{ input: '' }, 'input', /empty/],
    [{ input: 'A'.repeat(4097) }, 'input', /4096/],
    [{ model: 'minilm' }, 'model', /does not support speech/],
    [{ model: 'ctc' }, 'model', /does not support speech/],
    [{ response_format: 'ogg' }, 'response_format', /mp3/],
  ];
  for (const [body, param, message] of cases) {
    const err = await bad(body);
    t.equal(err?.status, 400, JSON.stringify(body).slice(0, 60));
    t.equal(err?.error.type, 'invalid_request_error');
    t.equal(err?.error.param, param);
    t.match(err?.error.message, message);
  }
  await fx.conforms(t, cases.length);
  t.equal((await speak(TEXT, { response_format: 'wav' })).bytes.subarray(0, 4).toString(), 'RIFF', 'the model still speaks');
});

t.test('a client that leaves mid-stream: ffmpeg is gone, the model serves the next request', async (t) => {
  // About 4 minutes of audio (11 MB of PCM): far more than the connection holds unread.
  const long = Array.from({ length: 50 }, (_, i) => `SENTENCE NUMBER ${'ABCDEFGHIJ'[i % 10]} IS HERE.`).join(' ');
  const ctl = new AbortController();
  const res = await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: long, response_format: 'pcm' }, { signal: ctl.signal });
  const reader = res.body!.getReader();
  const first = await reader.read();
  t.ok(first.value && first.value.length > 0, 'the first bytes came');
  t.ok(ffmpegChildren().length >= 1, 'ffmpeg encodes while the answer is read');
  ctl.abort();
  await reader.cancel().catch(() => undefined);
  for (let i = 0; i < 100 && ffmpegChildren().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
  t.same(ffmpegChildren(), [], 'no ffmpeg left');
  t.equal(await transcribe((await speak(TEXT, { response_format: 'pcm' })).bytes, 'pcm'), TEXT);
});

t.test('counted in /metrics', async (t) => {
  const metrics = await (await app.fetch('/metrics')).text();
  t.match(metrics, /lia_model_requests_total\{[^}]*kind="speech"[^}]*\} \d+/);
});
