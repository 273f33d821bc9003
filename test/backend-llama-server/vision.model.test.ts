/**
 * Images on every surface, on the tiny vision fixture (a llama-architecture model and its CLIP
 * projector, random weights: `npm run fixtures` builds them on first use). The model is created
 * from two GGUFs (the API's `files`, and `lia create` with a second FROM), `/api/show` lists
 * `vision`, and the registry runs it on llama-server with `--mmproj`. The output is random, so the
 * tests check what a client can: each surface's real client is answered, and the prompt grows by
 * the image's 16 tokens, so the image reached the model. An image to a model without `vision`,
 * a corrupt one, one that is no image and one over the size limit are 400s in each surface's
 * format, and the appliance keeps answering.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { TINY_VISION_IMAGE_TOKENS } from '../../scripts/fixtures/tiny-vision.js';
import { ROOT } from '../helpers/fixtures.js';
import { createModel, postJson, uploadBlob } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import { corruptPng, imageHeader, solidPng } from './images.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();
const textModel = await builtFixture('tiny-vision.gguf');
const projector = await builtFixture('tiny-vision-mmproj.gguf');

const MAX_IMAGE_BYTES = 4096;
const app = await startEngineAppliance({
  plugins: { 'api-openai': true, 'api-anthropic': true },
  // Remote images allowed here, to fetch from a loopback server (off by default: missing-binary.model.test.ts).
  env: { LIA_MAX_IMAGE_BYTES: String(MAX_IMAGE_BYTES), LIA_REMOTE_IMAGES: 'true', LIA_THREADS: '1', LIA_NUM_PARALLEL: '1', LIA_CONTEXT_LENGTH: '512' },
});
t.teardown(() => app.close());
const trusted = ((input: string | URL, init?: object) => undiciFetch(input, { ...init, dispatcher: app.dispatcher() })) as unknown as typeof fetch;
const ollama = ollamaClient(app);
const openai = new OpenAI({ baseURL: `${app.url}/v1`, apiKey: app.key, fetch: trusted, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: app.url, apiKey: app.key, fetch: trusted, maxRetries: 0 });
const backend = app.hooks.extensions
  .get('backends')
  .list()
  .find((b) => b.name === 'llama-server') as LlamaServerBackend;

const png = solidPng(32, 32).toString('base64');
const dataUrl = `data:image/png;base64,${png}`;
const post = (route: string, body: unknown) => postJson(app, route, body);

await createModel(app, 'text', 'gguf/stories260K.gguf');

t.test('a model from a GGUF and its projector has the vision capability', async (t) => {
  const files = { 'tiny-vision.gguf': await uploadBlob(app, textModel), 'tiny-vision-mmproj.gguf': await uploadBlob(app, projector) };
  const created = await post('/api/create', { model: 'vision', files, stream: false });
  t.equal(created.status, 200, JSON.stringify(created.json));
  const show = await post('/api/show', { model: 'vision' });
  t.equal(show.status, 200);
  t.ok(show.json.capabilities.includes('vision'), `capabilities: ${show.json.capabilities}`);
  t.ok(show.json.capabilities.includes('completion'));
  t.equal(show.json.model_info['general.architecture'], 'llama', 'the weights are the language model');
  const text = await post('/api/show', { model: 'text' });
  t.notOk(text.json.capabilities.includes('vision'), 'a model without a projector has no vision');

  const two = await post('/api/create', { model: 'bad', files: { 'a.gguf': files['tiny-vision.gguf'], 'b.gguf': files['tiny-vision.gguf'] }, stream: false });
  t.equal(two.status, 400, 'two GGUFs that are not weights and projector are a 400');
  t.match(two.json.error, /projector/);
});

t.test('lia create with a second FROM stores the projector too', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-vision-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(path.join(dir, 'Modelfile'), `FROM ${textModel}\nFROM ${projector}\n`);
  await writeFile(path.join(dir, 'ca.pem'), app.ca);
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), 'create', 'vision-cli', '-f', path.join(dir, 'Modelfile')], {
    cwd: dir,
    env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: path.join(dir, 'ca.pem') },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, out);
  const show = await post('/api/show', { model: 'vision-cli' });
  t.ok(show.json.capabilities.includes('vision'), `capabilities: ${show.json.capabilities}`);
});

/** Prompt tokens of a chat with and without the image, per surface. */
const counts: Record<string, { plain: number; image: number }> = {};

t.test('/api/chat and /api/generate take images (ollama client)', async (t) => {
  const ask = (images?: string[]) =>
    ollama.chat({ model: 'vision', messages: [{ role: 'user', content: 'What is this?', ...(images ? { images } : {}) }], options: { num_predict: 3 } });
  const plain = await ask();
  const image = await ask([png]);
  t.equal(image.done, true);
  counts['chat'] = { plain: plain.prompt_eval_count, image: image.prompt_eval_count };
  t.ok(
    backend.processes().some((p) => p.model === 'vision:latest'),
    'the vision model runs on llama-server',
  );

  const gen = (images?: string[]) => ollama.generate({ model: 'vision', prompt: 'Describe', ...(images ? { images } : {}), options: { num_predict: 3 } });
  const gPlain = await gen();
  const gImage = await gen([png]);
  t.equal(gImage.done, true);
  counts['generate'] = { plain: gPlain.prompt_eval_count, image: gImage.prompt_eval_count };
});

t.test('/v1/chat/completions takes image_url data URLs (openai client)', async (t) => {
  const ask = (withImage: boolean) =>
    openai.chat.completions.create({
      model: 'vision',
      max_tokens: 3,
      messages: [
        {
          role: 'user',
          content: [{ type: 'text', text: 'What is this?' }, ...(withImage ? [{ type: 'image_url' as const, image_url: { url: dataUrl } }] : [])],
        },
      ],
    });
  const plain = await ask(false);
  const image = await ask(true);
  t.ok(image.choices[0]?.message, 'answered');
  counts['openai'] = { plain: plain.usage!.prompt_tokens, image: image.usage!.prompt_tokens };
});

t.test('/v1/responses takes input_image (openai client)', async (t) => {
  const ask = (withImage: boolean) =>
    openai.responses.create({
      model: 'vision',
      max_output_tokens: 16,
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            ...(withImage ? [{ type: 'input_image' as const, image_url: dataUrl, detail: 'auto' as const }] : []),
          ],
        },
      ],
    });
  const plain = await ask(false);
  const image = await ask(true);
  t.equal(image.object, 'response');
  counts['responses'] = { plain: plain.usage!.input_tokens, image: image.usage!.input_tokens };
});

t.test('/v1/messages takes base64 image blocks (anthropic client)', async (t) => {
  const ask = (withImage: boolean) =>
    anthropic.messages.create({
      model: 'vision',
      max_tokens: 3,
      messages: [
        {
          role: 'user',
          content: [
            ...(withImage ? [{ type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: png } }] : []),
            { type: 'text' as const, text: 'What is this?' },
          ],
        },
      ],
    });
  const plain = await ask(false);
  const image = await ask(true);
  t.equal(image.type, 'message');
  counts['messages'] = { plain: plain.usage.input_tokens, image: image.usage.input_tokens };
});

t.test('with remoteImages on, an http(s) image URL is fetched; a failing one is a 400', async (t) => {
  const server = createServer((req, res) => {
    if (req.url === '/cat.png') res.writeHead(200, { 'content-type': 'image/png' }).end(solidPng(32, 32));
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const ask = (url?: string) =>
    anthropic.messages.create({
      model: 'vision',
      max_tokens: 3,
      messages: [
        {
          role: 'user',
          content: [...(url ? [{ type: 'image' as const, source: { type: 'url' as const, url } }] : []), { type: 'text' as const, text: 'What is this?' }],
        },
      ],
    });
  const plain = await ask();
  const fetched = await ask(`${base}/cat.png`);
  counts['url'] = { plain: plain.usage.input_tokens, image: fetched.usage.input_tokens };
  const missing = await post('/v1/chat/completions', {
    model: 'vision',
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `${base}/none.png` } }] }],
  });
  t.equal(missing.status, 400);
  t.match(missing.json.error.message, /could not be fetched \(HTTP 404\)/);
});

t.test('on every surface the image reached the model: the prompt grew by its tokens', async (t) => {
  t.same(Object.keys(counts).sort(), ['chat', 'generate', 'messages', 'openai', 'responses', 'url']);
  for (const [surface, c] of Object.entries(counts)) {
    t.equal(c.image - c.plain, TINY_VISION_IMAGE_TOKENS, `${surface}: ${c.plain} → ${c.image} prompt tokens`);
  }
});

t.test("an image to a model without vision is a 400 naming the capability, in each surface's format", async (t) => {
  const chat = await post('/api/chat', { model: 'text', messages: [{ role: 'user', content: 'x', images: [png] }], stream: false });
  t.equal(chat.status, 400);
  t.match(chat.json, { error: /does not support vision/ });
  const gen = await post('/api/generate', { model: 'text', prompt: 'x', images: [png], stream: false });
  t.equal(gen.status, 400);
  t.match(gen.json, { error: /does not support vision/ });
  const v1 = await post('/v1/chat/completions', { model: 'text', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl } }] }] });
  t.equal(v1.status, 400);
  t.match(v1.json, { error: { type: 'invalid_request_error', message: /does not support vision/ } });
  const resp = await post('/v1/responses', { model: 'text', input: [{ role: 'user', content: [{ type: 'input_image', image_url: dataUrl }] }] });
  t.equal(resp.status, 400);
  t.match(resp.json, { error: { message: /does not support vision/ } });
  const msg = await post('/v1/messages', {
    model: 'text',
    max_tokens: 4,
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } }] }],
  });
  t.equal(msg.status, 400);
  t.match(msg.json, { type: 'error', error: { type: 'invalid_request_error', message: /does not support vision/ } });
});

t.test('image bombs are refused by their declared size, per image and per request, before the engine decodes them', async (t) => {
  const bomb = imageHeader('bmp', 26_000, 26_000).toString('base64');
  const one = await post('/api/chat', { model: 'vision', messages: [{ role: 'user', content: 'x', images: [bomb] }], stream: false });
  t.equal(one.status, 400);
  t.match(one.json.error, /26000 × 26000 pixels is over the limit/);
  const hundred = await post('/api/chat', { model: 'vision', messages: [{ role: 'user', content: 'x', images: Array(100).fill(bomb) }], stream: false });
  t.equal(hundred.status, 400, 'a 7 KB body of 100 bombs');
  const big = imageHeader('png', 4096, 4096).toString('base64');
  const three = await post('/v1/chat/completions', {
    model: 'vision',
    messages: [{ role: 'user', content: [1, 2, 3].map(() => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${big}` } })) }],
  });
  t.equal(three.status, 400, 'three 16.7 MP images: each within the bound, over 50 MP in all');
  t.match(three.json.error, { type: 'invalid_request_error', message: /over 50 megapixels in all/ });
  const after = await ollama.chat({ model: 'vision', messages: [{ role: 'user', content: 'still there?', images: [png] }], options: { num_predict: 2 } });
  t.equal(after.done, true, 'the model still answers');
});

t.test('corrupt, non-image and oversized images are 400s, never a crash', async (t) => {
  const corrupt = corruptPng().toString('base64');
  const chat = await post('/api/chat', { model: 'vision', messages: [{ role: 'user', content: 'x', images: [corrupt] }], stream: false });
  t.equal(chat.status, 400, JSON.stringify(chat.json));
  t.match(chat.json.error, /image/);
  const v1 = await post('/v1/chat/completions', {
    model: 'vision',
    messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: `data:image/png;base64,${corrupt}` } }] }],
  });
  t.equal(v1.status, 400, JSON.stringify(v1.json));
  t.equal(v1.json.error.type, 'invalid_request_error');

  const text = Buffer.from('just some text, not a picture').toString('base64');
  const notImage = await post('/api/generate', { model: 'vision', prompt: 'x', images: [text], stream: false });
  t.equal(notImage.status, 400);
  t.match(notImage.json.error, /not a PNG, JPEG, GIF, WebP or BMP/);
  const notBase64 = await post('/api/generate', { model: 'vision', prompt: 'x', images: ['%%%'], stream: false });
  t.equal(notBase64.status, 400);
  t.match(notBase64.json.error, /base64/);

  const big = solidPng(64, 64, [1, 2, 3]);
  const noisy = Buffer.concat([big, Buffer.alloc(MAX_IMAGE_BYTES)]).toString('base64');
  const over = await post('/v1/messages', {
    model: 'vision',
    max_tokens: 4,
    messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: noisy } }] }],
  });
  t.equal(over.status, 400);
  t.match(over.json, { type: 'error', error: { message: new RegExp(`limit is ${MAX_IMAGE_BYTES}`) } });

  const after = await ollama.chat({ model: 'vision', messages: [{ role: 'user', content: 'still there?', images: [png] }], options: { num_predict: 2 } });
  t.equal(after.done, true, 'the model still answers');
});
