/**
 * `/v1/audio/transcriptions` and `/v1/audio/translations` refusals through `inject()`, with the
 * fake backend's speech model and text model: what is wrong with the request is a 400 (413 for a
 * file over `maxAudioBytes`) in OpenAI's shape naming the field, before any audio is decoded;
 * the `inference` scope and the key's model allow-list apply; `/api/show` lists the capability.
 */
import t from 'tap';
import { createFakeModel, createSpeechModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';

const app = await startTestAppliance({
  listen: false,
  plugins: {
    'host-network': false,
    'host-gpu': false,
    'host-services': false,
    webui: false,
    'fake-backend': FAKE_BACKEND,
    'api-openai': { options: { maxAudioBytes: 4096 } },
  },
});
t.teardown(() => app.close());
await createSpeechModel(app, 'ears', 10);
await createFakeModel(app, 'parrot', 'parrot says:');

/** A multipart body as the SDKs send it; `file` null leaves the file out. */
async function multipart(fields: Record<string, string | string[]>, file: Uint8Array | null = new Uint8Array(64)) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(name, v);
  if (file) form.append('file', new Blob([new Uint8Array(file)]), 'a.wav');
  const encoded = new Response(form);
  return { body: new Uint8Array(await encoded.arrayBuffer()), type: encoded.headers.get('content-type')! };
}

async function send(path: string, fields: Record<string, string | string[]>, file?: Uint8Array | null, headers: Record<string, string> = {}) {
  const { body, type } = await multipart(fields, file);
  const res = await app.fetch(path, { method: 'POST', headers: { 'content-type': type, ...headers }, body });
  return { status: res.status, json: (await res.json()) as { error: { message: string; type: string; param: string | null } } };
}

t.test('shown with the transcription capability only', async (t) => {
  const res = await app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'ears' }) });
  t.same(((await res.json()) as { capabilities: string[] }).capabilities, ['transcription']);
});

t.test('a field that is wrong is a 400 naming it', async (t) => {
  const cases: [Record<string, string | string[]>, Uint8Array | null, string, RegExp][] = [
    [{}, new Uint8Array(64), 'model', /model is required/],
    [{ model: 'ears' }, null, 'file', /file is required/],
    [{ model: 'ears', response_format: 'xml' }, new Uint8Array(64), 'response_format', /json, text, srt, vtt, verbose_json/],
    [{ model: 'ears', temperature: 'hot' }, new Uint8Array(64), 'temperature', /temperature/],
    [{ model: 'ears', 'timestamp_granularities[]': 'phoneme' }, new Uint8Array(64), 'timestamp_granularities', /segment/],
    [{ model: 'ears', stream: 'maybe' }, new Uint8Array(64), 'stream', /true or false/],
    [{ model: 'ears', stream: 'true', response_format: 'srt' }, new Uint8Array(64), 'stream', /srt/],
    [{ model: 'ears', language: 'English language' }, new Uint8Array(64), 'language', /ISO-639-1/],
  ];
  for (const [fields, file, param, message] of cases) {
    const res = await send('/v1/audio/transcriptions', fields, file);
    t.equal(res.status, 400, JSON.stringify(fields));
    t.equal(res.json.error.type, 'invalid_request_error');
    t.equal(res.json.error.param, param);
    t.match(res.json.error.message, message);
  }
});

t.test('not multipart: a 400 that says how to send it', async (t) => {
  const res = await app.fetch('/v1/audio/transcriptions', { method: 'POST', body: JSON.stringify({ model: 'ears', file: 'x' }) });
  t.equal(res.status, 400);
  t.match(((await res.json()) as { error: { message: string } }).error.message, /multipart\/form-data/);
});

t.test('a file over maxAudioBytes: 413 naming file', async (t) => {
  const res = await send('/v1/audio/transcriptions', { model: 'ears' }, new Uint8Array(5000));
  t.equal(res.status, 413);
  t.equal(res.json.error.param, 'file');
  t.match(res.json.error.message, /larger than 4096 bytes/);
});

t.test('a model without the capability, an unknown model', async (t) => {
  for (const path of ['/v1/audio/transcriptions', '/v1/audio/translations']) {
    const text = await send(path, { model: 'parrot' });
    t.equal(text.status, 400);
    t.equal(text.json.error.param, 'model');
    t.match(text.json.error.message, /does not support transcription/);
    const unknown = await send(path, { model: 'nobody' });
    t.equal(unknown.status, 404);
    t.equal(unknown.json.error.param, 'model');
  }
});

t.test('the inference scope and the model allow-list', async (t) => {
  const reader = await app.fetch('/system/api-keys', { method: 'POST', body: JSON.stringify({ name: 'reader', scopes: ['models:read'] }) });
  const readerKey = ((await reader.json()) as { key: string }).key;
  t.equal((await send('/v1/audio/transcriptions', { model: 'ears' }, undefined, { authorization: `Bearer ${readerKey}` })).status, 403);
  const other = await app.fetch('/system/api-keys', {
    method: 'POST',
    body: JSON.stringify({ name: 'parrot-only', scopes: ['inference'], models: ['parrot'] }),
  });
  const otherKey = ((await other.json()) as { key: string }).key;
  const res = await send('/v1/audio/transcriptions', { model: 'ears' }, undefined, { authorization: `Bearer ${otherKey}` });
  t.equal(res.status, 403);
  t.match(res.json.error.message, /may not use the model "ears"/);
});
