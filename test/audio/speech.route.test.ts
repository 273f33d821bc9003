/**
 * `/v1/audio/speech` through `inject()`, with the fake backend's voice model (two voices), its
 * speech recogniser and a text model: what is wrong with the request is a 400 in OpenAI's shape
 * naming the field; the `inference` scope and the key's model allow-list apply; `/api/show`
 * lists the voices; OpenAI's voice names map onto the model's; and the audio of the first
 * sentence leaves while a later sentence is held unspoken (`holdSpeech`), so the answer streams.
 */
import t from 'tap';
import { createFakeModel, createSpeechModel, createVoiceModel, FAKE_BACKEND, holdSpeech, startTestAppliance } from '../../core/testing/index.js';

const app = await startTestAppliance({
  listen: false,
  plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false, 'fake-backend': FAKE_BACKEND },
});
t.teardown(() => app.close());
await createVoiceModel(app, 'voice', ['alto', 'tenor']);
await createSpeechModel(app, 'ears');
await createFakeModel(app, 'parrot', 'parrot says:');

type OpenAIError = { error: { message: string; type: string; param: string | null } };

function speech(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return app.fetch('/v1/audio/speech', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

/** The bytes of a 200 answer. */
async function bytes(body: Record<string, unknown>): Promise<Buffer> {
  const res = await speech(body);
  if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`);
  return Buffer.from(await res.arrayBuffer());
}

t.test('shown with the speech capability and its voices', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'voice' }) });
  const show = (await res.json()) as { capabilities: string[]; voices: string[] };
  t.same(show.capabilities, ['speech']);
  t.same(show.voices, ['alto', 'tenor']);
  const text = (await (await app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'parrot' }) })).json()) as Record<string, unknown>;
  t.notOk('voices' in text, 'a text model has no voices');
});

t.test('a field that is wrong is a 400 naming it', async (t) => {
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ input: 'hi' }, 'model', /model/],
    [{ model: 'voice' }, 'input', /input/],
    [{ model: 'voice', input: '' }, 'input', /empty/],
    [{ model: 'voice', input: ' \n\t ' }, 'input', /empty/],
    [{ model: 'voice', input: 'x'.repeat(4097) }, 'input', /4096/],
    [{ model: 'voice', input: 'hi', voice: 'bass' }, 'voice', /alto, tenor.*alloy/],
    [{ model: 'voice', input: 'hi', response_format: 'ogg' }, 'response_format', /mp3/],
    [{ model: 'voice', input: 'hi', speed: 5 }, 'speed', /4/],
    [{ model: 'voice', input: 'hi', speed: 0.1 }, 'speed', /0.25/],
    [{ model: 'voice', input: 'hi', stream_format: 'ws' }, 'stream_format', /audio/],
    [{ model: 'voice', input: 42 }, 'input', /string/],
  ];
  for (const [body, param, message] of cases) {
    const res = await speech(body);
    const json = (await res.json()) as OpenAIError;
    t.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
    t.equal(json.error.type, 'invalid_request_error');
    t.equal(json.error.param, param, JSON.stringify(json));
    t.match(json.error.message, message);
  }
});

t.test('a model without the speech capability, an unknown model', async (t) => {
  for (const model of ['parrot', 'ears']) {
    const res = await speech({ model, input: 'hello', voice: 'alloy' });
    const json = (await res.json()) as OpenAIError;
    t.equal(res.status, 400, model);
    t.equal(json.error.param, 'model');
    t.match(json.error.message, /does not support speech/);
  }
  const unknown = await speech({ model: 'nobody', input: 'hello' });
  t.equal(unknown.status, 404);
  t.equal(((await unknown.json()) as OpenAIError).error.param, 'model');
});

t.test('the inference scope and the model allow-list', async (t) => {
  const reader = await app.fetch('/system/api-keys', { method: 'POST', body: JSON.stringify({ name: 'reader', scopes: ['models:read'] }) });
  const readerKey = ((await reader.json()) as { key: string }).key;
  t.equal((await speech({ model: 'voice', input: 'hi' }, { authorization: `Bearer ${readerKey}` })).status, 403);
  const other = await app.fetch('/system/api-keys', {
    method: 'POST',
    body: JSON.stringify({ name: 'parrot-only', scopes: ['inference'], models: ['parrot'] }),
  });
  const otherKey = ((await other.json()) as { key: string }).key;
  const res = await speech({ model: 'voice', input: 'hi' }, { authorization: `Bearer ${otherKey}` });
  t.equal(res.status, 403);
  t.match(((await res.json()) as OpenAIError).error.message, /may not use the model "voice"/);
});

t.test('voices: its own names, OpenAI names in turn, the first by default; unknown fields ignored', async (t) => {
  const pcm = (voice?: string) => bytes({ model: 'voice', input: 'HELLO THERE', response_format: 'pcm', ...(voice ? { voice } : {}), future_field: { x: 1 } });
  const alto = await pcm('alto');
  const tenor = await pcm('tenor');
  // 11 characters of 10 ms at 24 kHz, 16-bit.
  t.equal(alto.length, 11 * 240 * 2);
  t.notSame(alto, tenor, 'the voices differ');
  t.same(await pcm('alloy'), alto, 'alloy is the first voice');
  t.same(await pcm('ash'), tenor, 'ash is the second');
  t.same(await pcm('ballad'), alto, 'ballad the first again');
  t.same(await pcm(), alto, 'no voice: the first');
  const res = await speech({ model: 'voice', input: 'HI', response_format: 'wav', voice: { id: 'tenor' } });
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'audio/wav');
});

t.test('the first sentence leaves while a later one is not spoken yet', async (t) => {
  const release = holdSpeech();
  t.teardown(release);
  const res = await speech({ model: 'voice', input: 'FIRST PART IS HERE. HOLD ON. LAST ONE.', response_format: 'pcm', voice: 'alto' });
  t.equal(res.status, 200, 'the head left with the first sentence');
  const reader = res.body!.getReader();
  const first = await reader.read();
  t.notOk(first.done, 'bytes came while the second sentence is held');
  const firstSentence = 'FIRST PART IS HERE.'.length * 240 * 2;
  t.ok(first.value!.length > 0 && first.value!.length <= firstSentence, `${first.value!.length} bytes, at most the first sentence's ${firstSentence}`);
  release();
  let total = first.value!.length;
  for (let r = await reader.read(); !r.done; r = await reader.read()) total += r.value.length;
  t.equal(total, ('FIRST PART IS HERE.'.length + 'HOLD ON.'.length + 'LAST ONE.'.length) * 240 * 2, 'every sentence, nothing between them');
});

t.test('sse: delta events, then done with the usage', async (t) => {
  const res = await speech({ model: 'voice', input: 'ONE. TWO THREE.', response_format: 'pcm', stream_format: 'sse' });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/event-stream/);
  const events = (await res.text())
    .split('\n\n')
    .filter((f) => f.startsWith('event: '))
    .map((f) => ({
      name: f.split('\n')[0]!.slice(7),
      data: JSON.parse(f.split('\n')[1]!.slice(6)) as { type: string; audio?: string; usage?: Record<string, number> },
    }));
  const deltas = events.filter((e) => e.name === 'speech.audio.delta');
  t.ok(deltas.length >= 1);
  t.equal(events.at(-1)!.data.type, 'speech.audio.done');
  const pcm = Buffer.concat(deltas.map((d) => Buffer.from(d.data.audio!, 'base64')));
  t.same(pcm, await bytes({ model: 'voice', input: 'ONE. TWO THREE.', response_format: 'pcm' }), 'the same audio as the plain answer');
  const usage = events.at(-1)!.data.usage!;
  t.equal(usage['input_tokens'], 'ONE.'.length + 'TWO THREE.'.length, 'a token per character');
  t.equal(usage['output_tokens'], Math.ceil(14 * 0.01 * 20), '20 a second of audio');
  t.equal(usage['total_tokens'], usage['input_tokens']! + usage['output_tokens']!);
});
