/**
 * ONNX sentence embeddings end to end, over the real HTTPS API: a model folder added with
 * `lia create -f Modelfile` (`FROM ./folder`) and through `/api/blobs` + `/api/create`, listed by
 * `/api/tags`, `/api/show` and `/v1/models`, then embedded through `/api/embed`,
 * `/api/embeddings` and `/v1/embeddings` (the `openai` npm client, default base64, every body
 * validated against the OpenAI schema); generation endpoints refuse it with a 400.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { fixture, ROOT } from '../helpers/fixtures.js';
import { createModel, postJson, uploadBlob } from '../helpers/models.js';
import { schemaCheckedFetch, validateOpenAI } from '../helpers/openai-schema.js';
import { waitFor } from '../helpers/wait.js';

const maxDiff = (a: number[], b: number[]): number => Math.max(...a.map((x, i) => Math.abs(x - b[i]!)));
const norm = (v: number[]): number => Math.hypot(...v);

const TEXTS = ['The quick brown fox jumps over the lazy dog.', 'hello', 'naïve café — ünïcödé 🚀', 'a '.repeat(40).trim()];

// Compile the schemas before any socket is open: compiling blocks the event loop for seconds,
// long enough for the server to time out an idle keep-alive socket just as the client reuses it.
validateOpenAI('CreateEmbeddingResponse', {});
validateOpenAI('ErrorResponse', {});

const app = await startTestAppliance({
  plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false },
});
t.teardown(() => app.close());
await createModel(app, 'minilm', 'onnx/tiny-random-minilm');

const post = (pathname: string, body: unknown) => postJson(app, pathname, body);

t.test('lia create -f Modelfile with FROM ./folder', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-onnx-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await symlink(fixture('onnx/tiny-random-minilm'), path.join(dir, 'minilm-folder'));
  await writeFile(path.join(dir, 'Modelfile'), 'FROM ./minilm-folder\n');
  await writeFile(path.join(dir, 'ca.pem'), app.ca);
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), 'create', 'minilm-cli', '-f', path.join(dir, 'Modelfile')], {
    cwd: dir,
    env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: path.join(dir, 'ca.pem') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, out);
  t.match(out, /success/);
  const res = await post('/api/embed', { model: 'minilm-cli', input: 'hello' });
  t.equal(res.status, 200, JSON.stringify(res.json));
  t.equal(res.json.embeddings[0].length, 32);
});

t.test('listed as an ONNX bert model with the embedding capability only', async (t) => {
  const tags = (await (await app.fetch('/api/tags')).json()) as { models: any[] };
  const entry = tags.models.find((m) => m.name === 'minilm:latest');
  t.ok(entry, 'in /api/tags');
  t.equal(entry.details.format, 'onnx');
  t.equal(entry.details.family, 'bert');
  t.ok(entry.size > 4_000_000, `size ${entry.size}`);
  const show = await post('/api/show', { model: 'minilm' });
  t.equal(show.status, 200);
  t.same(show.json.capabilities, ['embedding']);
  const models = (await (await app.fetch('/v1/models')).json()) as { data: { id: string }[] };
  t.ok(
    models.data.some((m) => m.id === 'minilm:latest' || m.id === 'minilm'),
    'in /v1/models',
  );
});

t.test('/api/embed: unit vectors of width 32; a batch equals single calls', async (t) => {
  const batch = await post('/api/embed', { model: 'minilm', input: TEXTS });
  t.equal(batch.status, 200, JSON.stringify(batch.json));
  t.equal(batch.json.model, 'minilm');
  t.equal(batch.json.embeddings.length, TEXTS.length);
  for (const v of batch.json.embeddings as number[][]) {
    t.equal(v.length, 32);
    t.ok(Math.abs(norm(v) - 1) < 1e-5);
  }
  t.ok(batch.json.total_duration > 0);
  let tokens = 0;
  for (const [i, text] of TEXTS.entries()) {
    const one = await post('/api/embed', { model: 'minilm', input: text });
    t.ok(maxDiff(one.json.embeddings[0], batch.json.embeddings[i]) < 1e-5, `input ${i}`);
    tokens += one.json.prompt_eval_count;
  }
  t.equal(batch.json.prompt_eval_count, tokens, 'prompt_eval_count counts every input');
});

t.test('/api/embed: truncate and dimensions', async (t) => {
  const long = 'word '.repeat(700);
  const cut = await post('/api/embed', { model: 'minilm', input: [long] });
  t.equal(cut.status, 200);
  t.equal(cut.json.prompt_eval_count, 512, 'cut to the 512-token context');
  const refused = await post('/api/embed', { model: 'minilm', input: ['short', long], truncate: false });
  t.equal(refused.status, 400);
  t.same(refused.json, { error: 'the input length exceeds the context length' });
  const dims = await post('/api/embed', { model: 'minilm', input: TEXTS[0], dimensions: 8 });
  t.equal(dims.status, 200);
  t.equal(dims.json.embeddings[0].length, 8);
  t.ok(Math.abs(norm(dims.json.embeddings[0]) - 1) < 1e-5);
});

t.test('/api/embeddings (legacy): the raw, not normalised mean', async (t) => {
  const legacy = await post('/api/embeddings', { model: 'minilm', prompt: TEXTS[0] });
  t.equal(legacy.status, 200, JSON.stringify(legacy.json));
  const v = legacy.json.embedding as number[];
  t.equal(v.length, 32);
  const unit = (await post('/api/embed', { model: 'minilm', input: TEXTS[0] })).json.embeddings[0] as number[];
  t.ok(
    maxDiff(
      v.map((x) => x / norm(v)),
      unit,
    ) < 1e-5,
    'same direction as /api/embed',
  );
  const empty = await post('/api/embeddings', { model: 'minilm', prompt: '' });
  t.same(empty.json, { embedding: [] });
});

t.test('/v1/embeddings through the openai client: base64 (its default) equals floats', async (t) => {
  const checked = schemaCheckedFetch(app.dispatcher());
  const client = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: app.key, fetch: checked.fetch, maxRetries: 0 });
  const b64 = await client.embeddings.create({ model: 'minilm', input: TEXTS });
  const floats = await client.embeddings.create({ model: 'minilm', input: TEXTS, encoding_format: 'float' });
  const native = (await post('/api/embed', { model: 'minilm', input: TEXTS })).json.embeddings as number[][];
  t.equal(b64.data.length, TEXTS.length);
  for (const [i, d] of b64.data.entries()) {
    t.equal(d.index, i);
    t.same(Array.from(d.embedding), floats.data[i]!.embedding, `input ${i}: base64 decodes to the float vector exactly`);
    t.same(floats.data[i]!.embedding, native[i], `input ${i}: the same vector as /api/embed`);
  }
  t.ok(b64.usage.prompt_tokens > TEXTS.length);
  t.equal(b64.usage.total_tokens, b64.usage.prompt_tokens);
  const dims = await client.embeddings.create({ model: 'minilm', input: 'hello', dimensions: 4 });
  t.equal(dims.data[0]!.embedding.length, 4);
  const { failures, checked: n } = await checked.drain();
  t.same(failures, [], 'every body conforms to CreateEmbeddingResponse');
  t.ok(n >= 3);
});

t.test('generation endpoints refuse the embedding model with a 400 before any stream', async (t) => {
  const gen = await post('/api/generate', { model: 'minilm', prompt: 'hi' });
  t.equal(gen.status, 400);
  t.same(gen.json, { error: '"minilm" does not support generate' });
  const chat = await post('/api/chat', { model: 'minilm', messages: [{ role: 'user', content: 'hi' }] });
  t.equal(chat.status, 400);
  t.same(chat.json, { error: '"minilm" does not support chat' });
  const v1 = await post('/v1/chat/completions', { model: 'minilm', messages: [{ role: 'user', content: 'hi' }], stream: true });
  t.equal(v1.status, 400);
  t.match(v1.json, { error: { message: /"minilm" does not support (generate|chat)/, type: 'invalid_request_error' } });
  const legacy = await post('/v1/completions', { model: 'minilm', prompt: 'hi' });
  t.equal(legacy.status, 400);
  t.match(legacy.json, { error: { message: /"minilm" does not support generate/, type: 'invalid_request_error' } });
});

t.test('a stored folder without its tokenizer: a clear error naming the file', async (t) => {
  const dir = fixture('onnx/tiny-random-minilm');
  const files: Record<string, string> = {};
  for (const rel of ['config.json', 'tokenizer_config.json', 'onnx/model.onnx']) files[rel] = await uploadBlob(app, path.join(dir, rel));
  const created = await post('/api/create', { model: 'no-tokenizer', files, stream: false });
  t.equal(created.status, 200, JSON.stringify(created.json));
  const res = await post('/api/embed', { model: 'no-tokenizer', input: 'hello' });
  t.equal(res.status, 500);
  t.same(res.json, { error: 'model "no-tokenizer:latest" cannot be loaded: its folder has no tokenizer.json' });
  const v1 = await post('/v1/embeddings', { model: 'no-tokenizer', input: 'hello' });
  t.equal(v1.status, 500);
  t.match(v1.json, { error: { message: /its folder has no tokenizer\.json/, code: 'engine_error' } });
});

t.test('loaded like any model: /api/ps lists it, keep_alive 0 unloads it', async (t) => {
  await post('/api/embed', { model: 'minilm', input: 'warm' });
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: any[] };
  const loaded = ps.models.find((m) => m.name === 'minilm:latest');
  t.ok(loaded, 'in /api/ps');
  t.ok(loaded.size > 4_000_000, `size ${loaded?.size}`);
  t.equal(loaded.size_vram, 0);
  const unload = await post('/api/embed', { model: 'minilm', input: [], keep_alive: 0 });
  t.equal(unload.status, 200);
  t.same(unload.json.embeddings, []);
  // The scheduler unloads asynchronously once the request has released the model.
  const gone = await waitFor('the model to unload', async () => {
    const now = (await (await app.fetch('/api/ps')).json()) as { models: any[] };
    return !now.models.some((m) => m.name === 'minilm:latest');
  });
  t.ok(gone, 'unloaded');
  const again = await post('/api/embed', { model: 'minilm', input: 'back' });
  t.equal(again.status, 200, 'loads again on the next request');
});
