/**
 * A vendor turns the plugin off (`backend-transformers: false`): GGUF embeddings keep working,
 * ONNX models stored before stay listed, embedding one is a clear 400 on both surfaces, and a new
 * ONNX folder is refused (no enabled backend recognises it).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { STORE_ONLY } from '../model-store/setup.js';

const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-test-'));
t.teardown(() => rm(dataDir, { recursive: true, force: true }));
// Stored while the plugin was on.
const before = await startTestAppliance({ dataDir, plugins: STORE_ONLY });
await createModel(before, 'minilm', 'onnx/tiny-random-minilm');
await before.close();

const app = await startTestAppliance({
  dataDir,
  plugins: { 'backend-transformers': false, 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false },
});
t.teardown(() => app.close());

async function post(pathname: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await app.fetch(pathname, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() };
}

t.test('no onnx backend is registered', async (t) => {
  t.same(
    app.hooks.extensions
      .get('backends')
      .list()
      .map((b) => b.name)
      .filter((n) => n === 'transformers'),
    [],
  );
});

t.test('GGUF embeddings still work', async (t) => {
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  const res = await post('/api/embed', { model: 'stories', input: ['Once upon a time', 'there was a cat'] });
  t.equal(res.status, 200, JSON.stringify(res.json));
  t.equal(res.json.embeddings.length, 2);
  t.equal(res.json.embeddings[0].length, 64);
  t.ok(Math.abs(Math.hypot(...(res.json.embeddings[0] as number[])) - 1) < 1e-5, 'normalised');
});

t.test('a stored ONNX model is listed but embedding it is a clear 400', async (t) => {
  const tags = (await (await app.fetch('/api/tags')).json()) as { models: { name: string; details: { format: string; family: string } }[] };
  t.match(
    tags.models.find((m) => m.name === 'minilm:latest'),
    { details: { format: 'onnx', family: 'bert' } },
    'listed with its recorded details',
  );
  const embed = await post('/api/embed', { model: 'minilm', input: 'hello' });
  t.equal(embed.status, 400);
  t.same(embed.json, { error: 'no enabled inference backend runs models in the "onnx" format' });
  const v1 = await post('/v1/embeddings', { model: 'minilm', input: 'hello' });
  t.equal(v1.status, 400);
  t.match(v1.json, { error: { message: /no enabled inference backend runs models in the "onnx" format/, type: 'invalid_request_error' } });
});

t.test('a new ONNX folder is refused, naming what the enabled backends take', async (t) => {
  await t.rejects(createModel(app, 'minilm2', 'onnx/tiny-random-minilm'), /failed: 400 .*files.* must be one \.gguf file \(gguf\)/);
});
