/**
 * Without a llama-server binary the plugin still starts, and a model it must run is a 503 at once
 * that names the command that builds it (or the option that names a binary), while text models
 * that go to it by preference run on node-llama-cpp instead; `lia engine build --check` says the
 * same. No test here needs the binary.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { ROOT } from '../helpers/fixtures.js';
import { createModel, uploadBlob } from '../helpers/models.js';
import { startEngineAppliance } from '../engine/helpers.js';

const cache = await mkdtemp(path.join(os.tmpdir(), 'lia-no-server-'));
t.teardown(() => rm(cache, { recursive: true, force: true }));

t.test('a model given to llama-server without a built binary: 503 naming lia engine build', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_CACHE_DIR: cache, LIA_BACKENDS: 'stories:latest=llama-server' } });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  const res = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'stories', prompt: 'Hi', stream: false }) });
  t.equal(res.status, 503);
  t.match(await res.json(), { error: /llama-server is not built: run `lia engine build`/ });
  const tags = await app.fetch('/api/tags');
  t.equal(tags.status, 200, 'the appliance keeps answering');
  await tags.arrayBuffer();
});

t.test('a fresh install without the binary: text and chat run on node-llama-cpp, with no setting', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_CACHE_DIR: cache } });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  const res = await app.fetch('/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', stream: false, messages: [{ role: 'user', content: 'Hi' }], options: { num_predict: 2 } }),
  });
  t.equal(res.status, 200);
  t.match(await res.json(), { done: true });
  const servers = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-server') as unknown as { processes(): unknown[] };
  t.same(servers.processes(), [], 'no llama-server was started');
  const runners = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-cpp') as unknown as { processes(): Array<{ model: string }> };
  t.same(
    runners.processes().map((p) => p.model),
    ['stories:latest'],
    'a node-llama-cpp runner serves it',
  );
});

t.test('remote image URLs are not fetched by default: a 400 before any model loads', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_CACHE_DIR: cache } });
  t.teardown(() => app.close());
  const files = {
    'tiny-vision.gguf': await uploadBlob(app, await builtFixture('tiny-vision.gguf')),
    'tiny-vision-mmproj.gguf': await uploadBlob(app, await builtFixture('tiny-vision-mmproj.gguf')),
  };
  const created = await app.fetch('/api/create', { method: 'POST', body: JSON.stringify({ model: 'vision', files, stream: false }) });
  t.equal(created.status, 200);
  await created.arrayBuffer();
  const res = await app.fetch('/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'vision', stream: false, messages: [{ role: 'user', content: 'x', images: ['http://169.254.169.254/latest/meta-data'] }] }),
  });
  t.equal(res.status, 400);
  t.match(await res.json(), { error: /remote image URLs are not fetched/ });
});

t.test('a configured binary that is not there: 503 naming the option', async (t) => {
  const app = await startEngineAppliance({
    plugins: { 'backend-llama-server': { options: { binary: path.join(cache, 'nope', 'llama-server') } } },
    env: { LIA_BACKENDS: 'stories:latest=llama-server' },
  });
  t.teardown(() => app.close());
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  const res = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'Hi' }] }) });
  t.equal(res.status, 503);
  t.match(await res.json(), { error: /plugins\.backend-llama-server\.options\.binary: .* is not an executable file/ });
});

t.test('lia engine build --check fails naming the command when nothing is built', async (t) => {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), 'engine', 'build', '--check'], {
    env: { ...process.env, LIA_CACHE_DIR: cache, LIA_FROM_SOURCE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 1, out);
  t.match(out, /llama-server is not built; run `lia engine build`/);
});
