import { existsSync } from 'node:fs';
import { lstat, readdir, readFile, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { fixture } from '../helpers/fixtures.js';
import { createModel, fileDigest } from '../helpers/models.js';
import { call, ndjson, startStore } from './setup.js';

const STORIES = 'gguf/stories260K.gguf';

t.test('blob upload: 201, then 200, digest checked', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  const file = fixture(STORIES);
  const digest = await fileDigest(file);
  const bytes = await readFile(file);

  t.equal((await app.fetch(`/api/blobs/${digest}`, { method: 'HEAD' })).status, 404, 'HEAD before upload');
  const post = (d: string, body: Buffer | string) =>
    app.fetch(`/api/blobs/${d}`, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream' } });
  t.equal((await post(digest, bytes)).status, 201, 'created');
  t.equal((await app.fetch(`/api/blobs/${digest}`, { method: 'HEAD' })).status, 200, 'HEAD after upload');
  t.equal((await post(digest, bytes)).status, 200, 'already there');
  t.equal((await stat(path.join(app.dataDir, 'models', 'blobs', `sha256-${digest.slice(7)}`))).size, bytes.length);

  const wrong = 'sha256:' + '0'.repeat(64);
  const mismatch = await post(wrong, 'not the right bytes');
  t.equal(mismatch.status, 400);
  t.match(await mismatch.json(), { error: /digest mismatch, expected "sha256:0{64}", got "sha256:[0-9a-f]{64}"/ });
  t.equal((await app.fetch(`/api/blobs/${wrong}`, { method: 'HEAD' })).status, 404, 'nothing kept after a mismatch');
  const leftovers = (await readdir(path.join(app.dataDir, 'models', 'blobs'))).filter((n) => n.endsWith('.tmp'));
  t.same(leftovers, [], 'no temp files');

  for (const bad of ['sha256:abc', 'md5:' + '0'.repeat(64), 'sha256:' + 'g'.repeat(64), '..%2F..%2Fetc']) {
    const res = await post(bad, 'x');
    t.equal(res.status, 400, `bad digest ${bad}`);
    t.match(await res.json(), { error: /invalid digest format/ });
  }
  // curl -T style: no content type at all
  const noType = await app.fetch(`/api/blobs/sha256:${'1'.repeat(64)}`, { method: 'POST', body: new Uint8Array([1, 2, 3]) });
  t.equal(noType.status, 400, 'a body without a content type is hashed too');
});

t.test('create, tags, show, copy, delete over HTTPS', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  await createModel(app, 'stories', STORIES, {
    template: '{{ .System }} {{ .Prompt }}',
    system: 'Tell a story.',
    parameters: { temperature: 0.5, stop: ['<eos>', 'END'] },
    license: 'MIT',
    messages: [{ role: 'user', content: 'Once' }],
  });

  const tags = await call(app, 'GET', '/api/tags');
  t.equal(tags.status, 200);
  t.equal(tags.body.models.length, 1);
  t.equal((await app.fetch('/api/tags', { method: 'HEAD' })).status, 200, 'HEAD /api/tags');
  const m = tags.body.models[0];
  t.match(m, {
    name: 'stories:latest',
    model: 'stories:latest',
    modified_at: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$/,
    digest: /^[0-9a-f]{64}$/,
    details: { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '293K', quantization_level: 'F32' },
  });
  // size = every layer + the config blob
  const manifestFile = path.join(app.dataDir, 'models', 'manifests', 'registry.ollama.ai', 'library', 'stories', 'latest');
  const manifest = JSON.parse(await readFile(manifestFile, 'utf8'));
  const sum = manifest.layers.reduce((n: number, l: { size: number }) => n + l.size, manifest.config.size);
  t.equal(m.size, sum, 'size counts layers and config');
  t.ok(m.size > (await stat(fixture(STORIES))).size);
  const { createHash } = await import('node:crypto');
  t.equal(
    m.digest,
    createHash('sha256')
      .update(await readFile(manifestFile))
      .digest('hex'),
    'digest is the manifest hash',
  );
  t.same(
    manifest.layers.map((l: { mediaType: string }) => l.mediaType).sort(),
    ['model', 'template', 'system', 'params', 'license', 'messages'].map((x) => `application/vnd.ollama.image.${x}`).sort(),
  );

  const show = await call(app, 'POST', '/api/show', { name: 'stories' });
  t.equal(show.status, 200);
  t.match(show.body, {
    license: 'MIT',
    template: '{{ .System }} {{ .Prompt }}',
    system: 'Tell a story.',
    details: { format: 'gguf', family: 'llama' },
    messages: [{ role: 'user', content: 'Once' }],
    model_info: { 'general.architecture': 'llama', 'llama.context_length': 2048, 'llama.embedding_length': 64, 'general.parameter_count': 292800 },
    capabilities: ['completion'],
  });
  t.match(show.body.parameters, /^temperature {20}0\.5$/m);
  t.match(show.body.parameters, /^stop {27}"<eos>"$/m);
  t.match(show.body.modelfile, /^FROM .*blobs\/sha256-[0-9a-f]{64}$/m);
  t.match(show.body.modelfile, /^PARAMETER stop "END"$/m);
  t.notOk('general.name' in show.body.model_info);

  const missing = await call(app, 'POST', '/api/show', { model: 'nope' });
  t.equal(missing.status, 404);
  t.same(missing.body, { error: "model 'nope:latest' not found" });
  t.equal((await call(app, 'POST', '/api/show', {})).status, 400);

  // copy
  const cp = await call(app, 'POST', '/api/copy', { source: 'stories', destination: 'me/alias:v1' });
  t.equal(cp.status, 200);
  t.equal(cp.text, '', 'empty body');
  t.equal((await call(app, 'POST', '/api/copy', { source: 'ghost', destination: 'x' })).status, 404);
  const badDst = await call(app, 'POST', '/api/copy', { source: 'stories', destination: '../../etc/x' });
  t.equal(badDst.status, 400);
  t.match(badDst.body.error, /invalid destination name/);
  const names = (await call(app, 'GET', '/api/tags')).body.models.map((x: { name: string }) => x.name).sort();
  t.same(names, ['me/alias:v1', 'stories:latest']);

  // the engine's view
  const resolved = await app.hooks.extensions.get('models').resolve('me/alias:v1');
  t.equal(resolved.name, 'me/alias:v1');
  t.equal(resolved.format, 'gguf');
  t.equal(await fileDigest(resolved.modelPath), await fileDigest(fixture(STORIES)), 'modelPath is the GGUF blob');
  t.same(resolved.parameters, { temperature: 0.5, stop: ['<eos>', 'END'] });
  t.same(resolved.messages, [{ role: 'user', content: 'Once' }]);
  t.equal(resolved.system, 'Tell a story.');
  t.equal((await app.hooks.extensions.get('models').list()).length, 2);

  // delete: the alias goes, the blobs stay (stories still uses them); then stories goes and takes them
  const unloaded: string[] = [];
  app.hooks.extensions.get('models').onBeforeDelete(async (model) => void unloaded.push(model.name));
  const del = await call(app, 'DELETE', '/api/delete', { name: 'me/alias:v1' });
  t.equal(del.status, 200);
  t.equal(del.text, '');
  t.ok(existsSync(resolved.modelPath), 'shared blob kept');
  t.notOk(existsSync(path.join(app.dataDir, 'models', 'manifests', 'registry.ollama.ai', 'me')), 'empty folders pruned');
  t.equal((await call(app, 'DELETE', '/api/delete', { model: 'stories' })).status, 200);
  t.notOk(existsSync(resolved.modelPath), 'unused blob removed');
  t.same(await readdir(path.join(app.dataDir, 'models', 'blobs')), [], 'no blob left');
  t.same(unloaded, ['me/alias:v1', 'stories:latest'], 'the engine hook ran first');
  const gone = await call(app, 'DELETE', '/api/delete', { model: 'stories' });
  t.equal(gone.status, 404);
  t.same(gone.body, { error: "model 'stories:latest' not found" });
});

t.test('ONNX folder: one layer per file, laid out for the backend', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  await createModel(app, 'minilm', 'onnx/tiny-random-minilm');
  const tags = await call(app, 'GET', '/api/tags');
  t.match(tags.body.models[0], { name: 'minilm:latest', details: { format: 'onnx', family: 'bert', families: ['bert'], quantization_level: 'F32' } });
  const show = await call(app, 'POST', '/api/show', { model: 'minilm' });
  t.same(show.body.capabilities, ['embedding']);
  const r = await app.hooks.extensions.get('models').resolve('minilm');
  t.equal(r.format, 'onnx');
  t.same(r.capabilities, ['embedding']);
  t.ok((await lstat(r.modelPath)).isDirectory());
  const source = fixture('onnx/tiny-random-minilm');
  for (const rel of ['config.json', 'tokenizer.json', 'onnx/model.onnx', 'onnx/model_quantized.onnx']) {
    t.equal(await fileDigest(path.join(r.modelPath, rel)), await fileDigest(path.join(source, rel)), rel);
  }
  t.match(r.modelPath, /\/models\/\.lia\/onnx\/[0-9a-f]{64}$/);
  await call(app, 'DELETE', '/api/delete', { model: 'minilm' });
  t.notOk(existsSync(r.modelPath), 'the laid-out folder goes with the model');
});

t.test('create rejects bad input with clear 4xx', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  const digest = await fileDigest(fixture(STORIES));
  const cases: Array<[unknown, number, RegExp]> = [
    [{ model: 'x' }, 400, /neither 'from' or 'files'/],
    [{ files: { 'a.gguf': digest } }, 400, /model is required/],
    [{ model: 'x', files: { 'a.gguf': digest } }, 400, /not in the store; upload it/],
    [{ model: 'x', files: { '../a.gguf': digest } }, 400, /invalid file name/],
    [{ model: 'x', files: { '/etc/passwd': digest } }, 400, /invalid file name/],
    [{ model: 'x', files: { 'a.gguf': 'sha256:xyz' } }, 400, /invalid digest/],
    [{ model: 'x', files: 'a.gguf' }, 400, /"files" must be an object/],
    [{ model: 42, files: {} }, 400, /"model" must be a string/],
    [{ model: 'x', from: 'ghost' }, 404, /model 'ghost:latest' not found/],
    [{ model: 'x', from: 'ghost', quantize: 'q4_K_M' }, 400, /quantizing is not supported/],
    [{ model: 'bad name', from: 'ghost' }, 400, /invalid model name/],
    [[1, 2], 400, /must be a JSON object/],
  ];
  for (const [body, status, error] of cases) {
    const res = await call(app, 'POST', '/api/create', body);
    t.equal(res.status, status, JSON.stringify(body));
    t.match(res.body?.error, error, JSON.stringify(body));
  }
  t.equal((await call(app, 'POST', '/api/create', '{not json')).status, 400, 'malformed JSON');
  t.equal((await call(app, 'POST', '/api/create')).status, 400, 'no body');
  // a file that is not GGUF is refused while streaming, and no model appears
  const junk = Buffer.from('this is not a gguf file at all');
  const { createHash } = await import('node:crypto');
  const junkDigest = `sha256:${createHash('sha256').update(junk).digest('hex')}`;
  await app.fetch(`/api/blobs/${junkDigest}`, { method: 'POST', body: junk });
  const res = await call(app, 'POST', '/api/create', { model: 'junk', files: { 'junk.gguf': junkDigest } });
  t.equal(res.status, 200);
  const lines = ndjson(res.text);
  t.match(lines[lines.length - 1], { error: /not a valid GGUF model/ });
  t.same((await call(app, 'GET', '/api/tags')).body.models, []);
  // stream: false reports the same failure with its status
  const flat = await call(app, 'POST', '/api/create', { model: 'junk', files: { 'junk.gguf': junkDigest }, stream: false });
  t.equal(flat.status, 400);
});

t.test('create streams progress and builds from another model', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  await createModel(app, 'base', STORIES);
  const res = await call(app, 'POST', '/api/create', { model: 'derived', from: 'base', system: 'Be brief.', parameters: { top_k: 5 } });
  t.equal(res.status, 200);
  t.match(res.type, /application\/x-ndjson/);
  const lines = ndjson(res.text);
  t.same(lines[lines.length - 1], { status: 'success' });
  t.ok(lines.some((l) => /^using existing layer sha256:[0-9a-f]{64}$/.test(l.status)));
  t.ok(lines.some((l) => /^creating new layer sha256:[0-9a-f]{64}$/.test(l.status)));
  t.ok(lines.some((l) => l.status === 'writing manifest'));
  const show = await call(app, 'POST', '/api/show', { model: 'derived' });
  t.equal(show.body.system, 'Be brief.');
  t.equal(show.body.details.parent_model, 'base:latest');
  const tags = await call(app, 'GET', '/api/tags');
  t.equal(tags.body.models.find((m: { name: string }) => m.name === 'derived:latest').details.parent_model, 'base:latest');
});

t.test('OpenAI model listing (api-openai over the store)', async (t) => {
  const app = await startStore({}, { plugins: { engine: true, 'api-openai': true } });
  t.teardown(app.close);
  await createModel(app, 'stories', STORIES);
  await call(app, 'POST', '/api/copy', { source: 'stories', destination: 'team/stories:v2' });
  const list = await call(app, 'GET', '/v1/models');
  t.equal(list.status, 200);
  t.equal(list.body.object, 'list');
  t.same(list.body.data.map((d: { id: string }) => d.id).sort(), ['stories:latest', 'team/stories:v2']);
  for (const d of list.body.data) t.match(d, { object: 'model', created: Number, owned_by: String });
  for (const id of ['team/stories:v2', 'team%2Fstories%3Av2', 'team%2Fstories:v2']) {
    const one = await call(app, 'GET', `/v1/models/${id}`);
    t.equal(one.status, 200, id);
    t.match(one.body, { id: 'team/stories:v2', object: 'model', owned_by: 'team' }, id);
  }
  const missing = await call(app, 'GET', '/v1/models/ghost');
  t.equal(missing.status, 404);
  t.match(missing.body, { error: { message: "model 'ghost:latest' not found", type: 'invalid_request_error', code: 'model_not_found' } });
  t.equal((await app.fetch('/v1/models', { auth: false })).status, 401, 'needs the key');
});

t.test('an existing Ollama models folder is used as it is', async (t) => {
  // Lay out a store by hand exactly as Ollama does, then point LIA_MODELS at it.
  const { mkdtemp, mkdir, writeFile, copyFile, rm } = await import('node:fs/promises');
  const os = await import('node:os');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ollama-models-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const gguf = fixture('gguf/tinystories-656k-q8_0.gguf');
  const digest = await fileDigest(gguf);
  await mkdir(path.join(dir, 'blobs'), { recursive: true });
  await copyFile(gguf, path.join(dir, 'blobs', `sha256-${digest.slice(7)}`));
  const config = Buffer.from(
    JSON.stringify({
      model_format: 'gguf',
      model_family: 'llama',
      model_families: ['llama'],
      model_type: '656K',
      file_type: 'Q8_0',
      architecture: 'amd64',
      os: 'linux',
    }),
  );
  const { createHash } = await import('node:crypto');
  const configDigest = `sha256:${createHash('sha256').update(config).digest('hex')}`;
  await writeFile(path.join(dir, 'blobs', `sha256-${configDigest.slice(7)}`), config);
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: configDigest, size: config.length },
    layers: [{ mediaType: 'application/vnd.ollama.image.model', digest, size: (await stat(gguf)).size }],
  };
  await mkdir(path.join(dir, 'manifests', 'registry.ollama.ai', 'library', 'tiny'), { recursive: true });
  await writeFile(path.join(dir, 'manifests', 'registry.ollama.ai', 'library', 'tiny', 'q8'), JSON.stringify(manifest));

  // (LIA_MODELS sets the same option from the environment.)
  const app = await startStore({ modelsDir: dir });
  t.teardown(app.close);
  const tags = await call(app, 'GET', '/api/tags');
  t.match(tags.body.models, [{ name: 'tiny:q8', details: { parameter_size: '656K', quantization_level: 'Q8_0' } }]);
  const r = await app.hooks.extensions.get('models').resolve('TINY:q8');
  t.equal(r.modelPath, path.join(dir, 'blobs', `sha256-${digest.slice(7)}`), 'case-insensitive match, blob path in that folder');
  t.equal(r.details.quantization_level, 'Q8_0');
});

t.test('names that try to leave the store are refused', async (t) => {
  const app = await startStore();
  t.teardown(app.close);
  for (const name of ['../../../etc/passwd', '/etc/passwd', 'a/../../b', '..', 'x\u0000y', 'ü', 'a/b/c/d', 'ns/..:tag', 'm:..']) {
    for (const [method, url, body] of [
      ['POST', '/api/show', { model: name }],
      ['DELETE', '/api/delete', { model: name }],
      ['POST', '/api/pull', { model: name }],
      ['POST', '/api/create', { model: name, from: 'x' }],
    ] as const) {
      const res = await call(app, method, url, body);
      t.equal(res.status, 400, `${url} ${JSON.stringify(name)}`);
      t.match(res.body.error, /invalid model name/, `${url} ${JSON.stringify(name)}`);
    }
  }
  const link = await readlink(path.join(app.dataDir, 'models')).catch(() => null);
  t.equal(link, null);
});
