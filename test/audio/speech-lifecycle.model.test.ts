/**
 * Speech models under the scheduler, as a user meets them over the real HTTPS API: the designed
 * `tiny-ctc`, `tiny-whisper` and `tiny-vits` fixtures (npm run fixtures), asked with the official
 * `openai` client (`audio.transcriptions.create`, `audio.speech.create`) and watched and unloaded
 * with the official `ollama` client. After a request `/api/ps` lists the model with its size and an
 * `expires_at` at the configured default keep-alive; Ollama's unload (`keep_alive: 0` with an empty
 * prompt or no messages) unloads a speech model like any other; a model whose keep-alive ran out is
 * gone and the next request loads it again; with a memory budget that holds Whisper or VITS but not
 * both, one evicts the other and both keep answering, and one in use (a speech answer being read,
 * or left by its client) is not evicted before it ends; `/metrics` and `/system/usage` count every
 * request by model and kind.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { toFile } from 'openai';
import type OpenAI from 'openai';
import t, { type Test } from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { openaiFixture, type OpenAIFixture } from '../api-openai/openai-client.js';
import { ollamaClient } from '../engine/helpers.js';
import type { TestAppliance } from '../helpers/appliance.js';
import { waitFor } from '../helpers/wait.js';
import { encode, fromPcm16, tones, wordTones } from './signals.js';

const MB = 1024 * 1024;
const KEEP_ALIVE_MS = 7 * 60_000;
/**
 * Holds VITS (its 320 MB synthesis pass) with the CTC model, or Whisper, but not VITS and
 * Whisper: about 368, 53 and 110 MB, each with its worker thread's 48 MB.
 */
const BUDGET = 448 * MB;

const folders = { ctc: await builtFixture('tiny-ctc'), whisper: await builtFixture('tiny-whisper'), vits: await builtFixture('tiny-vits') };
const design = JSON.parse(await readFile(path.join(folders.whisper, 'design.json'), 'utf8')) as { words: Record<string, Record<string, number>> };

const fx = await openaiFixture(t, folders, { engine: { options: { memoryBudget: BUDGET } } }, { LIA_KEEP_ALIVE: '7m' });
const { app, client } = fx;
const ollama = ollamaClient(app);

const TEXT = "HELLO WORLD IT'S LIA";
const GERMAN = ['eins', 'zwei', 'hallo', 'welt'];
const ctcAudio = encode(tones(TEXT).samples, 'wav');
const whisperAudio = encode(wordTones(design.words['de']!, GERMAN).samples, 'wav');

/** What `model` hears in `audio` (a WAV file). */
async function transcribe(on: OpenAI, model: string, audio: Buffer): Promise<string> {
  return (await on.audio.transcriptions.create({ file: await toFile(audio, 'speech.wav'), model })).text;
}

/** `input` spoken by `vits`, as a WAV file at its 24 kHz. */
async function speak(on: OpenAI, input: string): Promise<Buffer> {
  const res = await on.audio.speech.create({ model: 'vits', voice: 'alloy', input, response_format: 'pcm' });
  return encode(fromPcm16(Buffer.from(await res.arrayBuffer())), 'wav', { rate: 24000, outRate: 24000 });
}

type Listed = { name: string; size: number; size_vram: number; expires_at: string | Date };

/** The models `/api/ps` lists, by name. */
async function loaded(of: TestAppliance = app): Promise<Map<string, Listed>> {
  const models = (await ollamaClient(of).ps()).models as unknown as Listed[];
  return new Map(models.map((m) => [m.name, m]));
}

/** A counter or gauge of `/metrics` whose labels include `labels`; 0 when absent. */
async function metric(name: string, labels: Record<string, string>, of: TestAppliance = app): Promise<number> {
  const text = await (await of.fetch('/metrics')).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) sum += Number(m[3]);
  }
  return sum;
}

/** `/api/ps` lists `name` with a size and an `expires_at` the configured keep-alive after the request. */
async function listedWithKeepAlive(t: Test, name: string, before: number, after: number): Promise<void> {
  const entry = (await loaded()).get(name);
  if (!entry) return void t.fail(`${name} is not in /api/ps`);
  t.ok(entry.size > 0, `${name}: a size (${entry.size} bytes)`);
  t.equal(entry.size_vram, 0, `${name}: on the CPU`);
  const expires = new Date(entry.expires_at).getTime();
  t.ok(
    expires >= before + KEEP_ALIVE_MS - 1000 && expires <= after + KEEP_ALIVE_MS + 1000,
    `${name}: expires_at ${new Date(expires).toISOString()} is 7 minutes after the request (LIA_KEEP_ALIVE=7m)`,
  );
}

t.test('after a request, /api/ps lists the speech model with its size and the default keep-alive', async (t) => {
  let before = Date.now();
  t.equal(await transcribe(client, 'ctc', ctcAudio), TEXT);
  await listedWithKeepAlive(t, 'ctc:latest', before, Date.now());

  before = Date.now();
  const spoken = await speak(client, TEXT);
  await listedWithKeepAlive(t, 'vits:latest', before, Date.now());
  t.ok((await loaded()).has('ctc:latest'), 'the transcription model stays beside it (both fit the budget)');
  t.equal(await transcribe(client, 'ctc', spoken), TEXT, 'what VITS said');
});

t.test("Ollama's unload: keep_alive 0 with an empty prompt, or no messages, unloads a speech model", async (t) => {
  await speak(client, TEXT);
  await transcribe(client, 'ctc', ctcAudio);
  t.ok((await loaded()).has('vits:latest') && (await loaded()).has('ctc:latest'), 'both loaded');

  const generate = await ollama.generate({ model: 'vits', prompt: '', keep_alive: 0 });
  t.match(generate, { model: 'vits', response: '', done: true, done_reason: 'unload' });
  t.notOk((await loaded()).has('vits:latest'), '/api/generate unloaded the text-to-speech model');

  const chat = await ollama.chat({ model: 'ctc', messages: [], keep_alive: 0 });
  t.match(chat, { model: 'ctc', message: { role: 'assistant', content: '' }, done: true, done_reason: 'unload' });
  t.notOk((await loaded()).has('ctc:latest'), '/api/chat unloaded the transcription model');

  const again = await ollama.generate({ model: 'ctc', prompt: '', keep_alive: 0 });
  t.equal(again.done_reason, 'unload', 'unloading a model that is not loaded is answered the same');

  // An empty prompt without keep_alive 0 loads it, with the request's keep_alive.
  const load = await ollama.generate({ model: 'whisper', prompt: '', keep_alive: '1h' });
  t.equal(load.done_reason, 'load');
  const whisper = (await loaded()).get('whisper:latest');
  t.ok(whisper && new Date(whisper.expires_at).getTime() > Date.now() + 50 * 60_000, 'loaded for an hour');
  await ollama.generate({ model: 'whisper', prompt: '', keep_alive: 0 });
  t.same([...(await loaded()).keys()], [], 'nothing loaded');

  t.equal(await transcribe(client, 'ctc', await speak(client, TEXT)), TEXT, 'both load again on their next request and answer');
});

t.test('a memory budget that holds one of two: each evicts the other, and both keep answering', async (t) => {
  const store = app.hooks.extensions.get('models');
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'transformers')!;
  const opts = { parallel: 1, threads: 1, contextLength: 0 };
  const bytes = async (name: string) => (await backend.estimateMemory(await store.resolve(name), opts)).totalBytes;
  const [vits, whisper, ctc] = [await bytes('vits'), await bytes('whisper'), await bytes('ctc')];
  t.ok(vits <= BUDGET && whisper <= BUDGET && vits + ctc <= BUDGET, `each fits, and VITS beside the CTC model (${vits}, ${whisper}, ${ctc} bytes)`);
  t.ok(vits + whisper > BUDGET, 'VITS and Whisper together do not');

  for (const name of [...(await loaded()).keys()]) await ollama.generate({ model: name, prompt: '', keep_alive: 0 });
  const unloads = async (model: string) => metric('lia_model_unloads_total', { model });

  t.equal(await transcribe(client, 'whisper', whisperAudio), GERMAN.join(' '));
  t.same([...(await loaded()).keys()], ['whisper:latest']);
  const whisperUnloads = await unloads('whisper:latest');

  const spoken = await speak(client, TEXT);
  t.same([...(await loaded()).keys()], ['vits:latest'], 'the speech request evicted Whisper');
  t.equal(await unloads('whisper:latest'), whisperUnloads + 1, 'counted as an unload');

  t.equal(await transcribe(client, 'ctc', spoken), TEXT, 'the CTC model loads beside VITS and hears it');
  t.same([...(await loaded()).keys()].sort(), ['ctc:latest', 'vits:latest']);
  const vitsUnloads = await unloads('vits:latest');

  t.equal(await transcribe(client, 'whisper', whisperAudio), GERMAN.join(' '), 'Whisper loads again and answers');
  const now = await loaded();
  t.ok(now.has('whisper:latest') && !now.has('vits:latest'), 'evicting VITS');
  t.equal(await unloads('vits:latest'), vitsUnloads + 1);

  t.equal(await transcribe(client, 'ctc', await speak(client, TEXT)), TEXT, 'VITS loads again and speaks');
  t.notOk((await loaded()).has('whisper:latest'), 'evicting Whisper');
});

t.test('a speech model in use is not evicted: the other model waits for its answer, or for its client to leave', async (t) => {
  for (const name of [...(await loaded()).keys()]) await ollama.generate({ model: name, prompt: '', keep_alive: 0 });
  // About 4 minutes of audio: far more than the connection holds unread, so the answer is in use until read.
  const long = Array.from({ length: 50 }, (_, i) => `SENTENCE NUMBER ${'ABCDEFGHIJ'[i % 10]} IS HERE.`).join(' ');
  const queuedForWhisper = () => metric('lia_model_queue_depth', { model: 'whisper:latest' });

  for (const ending of ['read to its end', 'left by its client'] as const) {
    const ctl = new AbortController();
    const res = await client.audio.speech.create({ model: 'vits', voice: 'alloy', input: long, response_format: 'pcm' }, { signal: ctl.signal });
    const reader = res.body!.getReader();
    const first = await reader.read();
    t.ok(first.value && first.value.length > 0, `${ending}: the first bytes came`);
    const other = transcribe(client, 'whisper', whisperAudio);
    await waitFor('the Whisper request to wait for room', async () => (await queuedForWhisper()) === 1);
    t.ok((await loaded()).has('vits:latest'), `${ending}: VITS stays loaded`);
    t.equal(await metric('lia_model_busy_slots', { model: 'vits:latest' }), 1, `${ending}: answering`);
    if (ending === 'read to its end') {
      let bytes = first.value!.length;
      for (let r = await reader.read(); !r.done; r = await reader.read()) bytes += r.value.length;
      t.ok(bytes > 24000 * 2 * 60, `the whole answer came (${bytes} bytes)`);
    } else {
      ctl.abort();
      await reader.cancel().catch(() => undefined);
    }
    t.equal(await other, GERMAN.join(' '), `${ending}: then Whisper is loaded and answers`);
    t.same([...(await loaded()).keys()], ['whisper:latest'], `${ending}: in VITS's place`);
  }
});

t.test('/metrics and /system/usage count each request by model and kind', async (t) => {
  const made = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'voice', scopes: ['inference'] }),
  });
  t.equal(made.status, 201);
  const voice = fx.clientWithKey(((await made.json()) as { key: string }).key);
  const requests = (model: string, kind: string) => metric('lia_model_requests_total', { model, kind });
  const start = {
    ctc: await requests('ctc:latest', 'transcribe'),
    whisper: await requests('whisper:latest', 'transcribe'),
    vits: await requests('vits:latest', 'speech'),
  };

  const spoken = await speak(voice, TEXT);
  t.equal(await transcribe(voice, 'ctc', spoken), TEXT);
  t.equal(await transcribe(voice, 'ctc', ctcAudio), TEXT);
  t.equal(await transcribe(voice, 'whisper', whisperAudio), GERMAN.join(' '));

  t.equal(await requests('ctc:latest', 'transcribe'), start.ctc + 2, 'two transcriptions on ctc');
  t.equal(await requests('whisper:latest', 'transcribe'), start.whisper + 1, 'one on whisper');
  t.equal(await requests('vits:latest', 'speech'), start.vits + 1, 'one speech request on vits');
  t.equal(await requests('vits:latest', 'transcribe'), 0, 'no other kind on vits');
  t.equal(await metric('lia_key_requests_total', { key: 'voice' }), 4, "the key's requests");

  type Usage = { keys: { name: string; requests: number; models: Record<string, { requests: number; prompt_tokens: number; completion_tokens: number }> }[] };
  const usage = ((await (await app.fetch('/system/usage')).json()) as Usage).keys.find((k) => k.name === 'voice');
  t.equal(usage?.requests, 4);
  t.match(usage?.models, { 'ctc:latest': { requests: 2 }, 'whisper:latest': { requests: 1 }, 'vits:latest': { requests: 1 } });
  t.ok(usage!.models['vits:latest']!.prompt_tokens > 0 && usage!.models['vits:latest']!.completion_tokens > 0, 'speech: the tokens read and the audio tokens');
  t.ok(usage!.models['ctc:latest']!.completion_tokens > 0, 'transcription: the tokens written');
});

t.test('a speech model whose keep-alive ran out is unloaded, and the next request loads it again', async (t) => {
  // A second appliance whose default keep-alive is 1 s.
  const short: OpenAIFixture = await openaiFixture(t, { ctc: folders.ctc, vits: folders.vits }, {}, { LIA_KEEP_ALIVE: '1s' });
  const count = (name: string, model: string) => metric(name, { model }, short.app);

  for (const round of [1, 2]) {
    t.equal(await transcribe(short.client, 'ctc', await speak(short.client, TEXT)), TEXT, `round ${round}: spoken and heard`);
    t.equal(await count('lia_model_loads_total', 'vits:latest'), round, `round ${round}: VITS loaded`);
    t.equal(await count('lia_model_loads_total', 'ctc:latest'), round, `round ${round}: the CTC model loaded`);
    await waitFor('both keep-alives to run out', async () => (await loaded(short.app)).size === 0, { timeoutMs: 60_000 });
    t.equal(await count('lia_model_unloads_total', 'vits:latest'), round, `round ${round}: VITS unloaded`);
    t.equal(await count('lia_model_unloads_total', 'ctc:latest'), round, `round ${round}: the CTC model unloaded`);
  }
});
