import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { fixture } from '../helpers/fixtures.js';
import { createModel, fileDigest } from '../helpers/models.js';
import { startTestRegistry, type TestRegistry } from '../helpers/registry.js';
import { waitFor } from '../helpers/wait.js';
import { startProxy, type ProxyAction, type TestProxy } from './proxy.js';
import { call, ndjson, startStore } from './setup.js';

const STORIES = 'gguf/stories260K.gguf';

/** A registry holding `library/stories:latest`, pushed by the product itself. */
async function seededRegistry(t: Test): Promise<{ reg: TestRegistry; proxy: TestProxy; weights: string; weightsSize: number }> {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const seeder = await startStore();
  await createModel(seeder, 'stories', STORIES, { template: '{{ .Prompt }}' });
  const name = `${reg.host}/library/stories:latest`;
  await call(seeder, 'POST', '/api/copy', { source: 'stories', destination: name });
  const pushed = await call(seeder, 'POST', '/api/push', { name, insecure: true, stream: false });
  if (pushed.status !== 200) throw new Error(`seeding the registry failed: ${pushed.text}`);
  await seeder.close();
  const proxy = await startProxy(reg.port);
  t.teardown(proxy.close);
  const file = fixture(STORIES);
  return { reg, proxy, weights: await fileDigest(file), weightsSize: (await stat(file)).size };
}

const modelName = (proxy: TestProxy) => `${proxy.host}/library/stories:latest`;

/** Has the proxy cut the first GET of `digest` after `after` bytes and pass everything else. */
function cutFirstGet(proxy: TestProxy, digest: string, after: number): void {
  let cut = false;
  proxy.decide = (req) => {
    if (req.method === 'GET' && req.url.includes(digest) && !cut) {
      cut = true;
      return { kind: 'cut', after };
    }
    return { kind: 'pass' };
  };
}

t.test('a connection cut mid-blob is resumed, not restarted', async (t) => {
  const { proxy, weights } = await seededRegistry(t);
  cutFirstGet(proxy, weights, 300_000);
  const app = await startStore();
  t.teardown(app.close);
  const res = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true });
  const lines = ndjson(res.text);
  t.same(lines.at(-1), { status: 'success' });
  const gets = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(weights));
  t.equal(gets.length, 2, 'one retry');
  const resumedAt = Number(/bytes=(\d+)-/.exec(gets[1]!.range ?? '')?.[1]);
  t.ok(resumedAt >= 200_000, `the retry asked for the rest only (from byte ${resumedAt})`);
  const r = await app.hooks.extensions.get('models').resolve(modelName(proxy));
  t.equal(await fileDigest(r.modelPath), weights, 'the blob is intact');
});

t.test('parallel ranged parts, one of them cut', async (t) => {
  const { proxy, weights, weightsSize } = await seededRegistry(t);
  let cuts = 0;
  proxy.decide = (req) => {
    if (req.method === 'GET' && req.url.includes(weights) && req.range?.startsWith('bytes=262144-') && cuts++ === 0) return { kind: 'cut', after: 100_000 };
    return { kind: 'pass' };
  };
  const app = await startStore({ downloadPartMinBytes: 256 * 1024 });
  t.teardown(app.close);
  const res = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.same(res.body, { status: 'success' });
  const ranges = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(weights)).map((r) => r.range);
  const parts = Math.ceil(weightsSize / (256 * 1024));
  t.equal(ranges.length, parts + 1, `${parts} parts plus one retry`);
  t.ok(ranges.includes('bytes=0-262143'), 'first part');
  t.ok(
    ranges.some((r) => r?.startsWith('bytes=362144-')),
    'the cut part resumed at its offset',
  );
  const r = await app.hooks.extensions.get('models').resolve(modelName(proxy));
  t.equal(await fileDigest(r.modelPath), weights);
});

t.test('a corrupt blob from the registry fails the pull and leaves nothing visible', async (t) => {
  const { reg, proxy, weights, weightsSize } = await seededRegistry(t);
  const fh = await open(reg.blobFile(weights), 'r+');
  await fh.write(Buffer.alloc(4096, 0x42), 0, 4096, Math.floor(weightsSize / 2));
  await fh.close();
  const app = await startStore();
  t.teardown(app.close);
  const res = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true });
  const last = ndjson(res.text).at(-1);
  t.match(last, { error: new RegExp(`digest mismatch, file must be downloaded again: want ${weights}, got sha256:[0-9a-f]{64}`) });
  const blobs = await readdir(path.join(app.dataDir, 'models', 'blobs'));
  t.notOk(blobs.includes(`sha256-${weights.slice(7)}`), 'the corrupt blob is not in the store');
  t.notOk(
    blobs.some((b) => b.includes('partial')),
    'no partial download kept',
  );
  t.same((await call(app, 'GET', '/api/tags')).body.models, [], 'no manifest');
  const flat = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.equal(flat.status, 502);
  t.match(flat.body.error, /digest mismatch/);
});

t.test('an interrupted pull resumes after a restart', async (t) => {
  const { proxy, weights } = await seededRegistry(t);
  proxy.decide = (req) => (req.method === 'GET' && req.url.includes(weights) ? { kind: 'stall', after: 500_000 } : { kind: 'pass' });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-resume-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const first = await startStore({}, { dataDir });
  const ctl = new AbortController();
  const res = await first.fetch('/api/pull', { method: 'POST', body: JSON.stringify({ name: modelName(proxy), insecure: true }), signal: ctl.signal });
  // read until the layer has 500 KB, then hang up like a user pressing Ctrl-C
  const reader = res.body!.getReader();
  let text = '';
  while (!/"completed":5\d{5}/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
  ctl.abort();
  const partial = path.join(dataDir, 'models', 'blobs', `sha256-${weights.slice(7)}-partial.json`);
  await waitFor('the saved progress', async () => /"completed":5\d{5}/.test(await readFile(partial, 'utf8').catch(() => '')));
  await first.close();
  t.match(await readFile(partial, 'utf8'), /"completed":500000/, 'progress was saved');

  proxy.decide = () => ({ kind: 'pass' });
  const second = await startStore({}, { dataDir });
  t.teardown(second.close);
  const again = await call(second, 'POST', '/api/pull', { name: modelName(proxy), insecure: true });
  const lines = ndjson(again.text);
  t.same(lines.at(-1), { status: 'success' });
  const firstWeightsLine = lines.find((l) => l.digest === weights);
  t.equal(firstWeightsLine.completed, 500_000, 'progress starts where it stopped');
  const gets = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(weights));
  t.equal(gets.at(-1)!.range?.startsWith('bytes=500000-'), true, 'only the rest was requested');
  const r = await second.hooks.extensions.get('models').resolve(modelName(proxy));
  t.equal(await fileDigest(r.modelPath), weights);
  t.notOk(existsSync(partial), 'the part state is gone');
});

t.test('Bearer challenges are answered and blob redirects to another host are followed', async (t) => {
  const { reg, proxy, weights } = await seededRegistry(t);
  // A second proxy stands for the storage host blobs are redirected to (as registry.ollama.ai does).
  const storage = await startProxy(reg.port);
  t.teardown(storage.close);
  proxy.decide = (req): ProxyAction => {
    if (req.url.startsWith('/token')) return { kind: 'respond', status: 200, headers: { 'content-type': 'application/json' }, body: '{"token":"t0k3n"}' };
    if (req.authorization !== 'Bearer t0k3n') {
      return {
        kind: 'respond',
        status: 401,
        headers: { 'www-authenticate': `Bearer realm="http://${proxy.host}/token",service="test",scope="repository:library/stories:pull"` },
        body: '{"errors":[{"code":"UNAUTHORIZED"}]}',
      };
    }
    if (req.url.includes('/blobs/')) return { kind: 'redirect', base: `http://localhost:${storage.port}` };
    return { kind: 'pass' };
  };
  const app = await startStore();
  t.teardown(app.close);
  const res = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.same(res.body, { status: 'success' });
  const token = proxy.requests.find((r) => r.url.startsWith('/token'));
  t.match(token?.url, /service=test/);
  t.match(token?.url, /scope=repository%3Alibrary%2Fstories%3Apull/);
  t.ok(
    storage.requests.some((r) => r.url.includes(weights)),
    'the blob came from the other host',
  );
  t.notOk(
    storage.requests.some((r) => r.authorization),
    'the registry token was not sent to the other host',
  );
  const r = await app.hooks.extensions.get('models').resolve(modelName(proxy));
  t.equal(await fileDigest(r.modelPath), weights);
});

t.test('a model larger than the free space fails before anything is written', async (t) => {
  // The registry keeps what a manifest declares; this one says its weights are 1 PB.
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const body = Buffer.from('{}');
  const digest = `sha256:${createHash('sha256').update(body).digest('hex')}`;
  const start = await fetch(`${reg.url}/v2/library/huge/blobs/uploads/`, { method: 'POST' });
  const upload = new URL(start.headers.get('location')!, reg.url);
  upload.searchParams.set('digest', digest);
  t.equal((await fetch(upload, { method: 'PUT', body, headers: { 'content-type': 'application/octet-stream' } })).status, 201);
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest, size: body.length },
    layers: [{ mediaType: 'application/vnd.ollama.image.model', digest, size: 1e15 }],
  };
  const put = await fetch(`${reg.url}/v2/library/huge/manifests/latest`, {
    method: 'PUT',
    body: JSON.stringify(manifest),
    headers: { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' },
  });
  t.equal(put.status, 201);
  const app = await startStore();
  t.teardown(app.close);
  const res = await call(app, 'POST', '/api/pull', { name: `${reg.host}/library/huge`, insecure: true });
  const lines = ndjson(res.text);
  t.same(lines[0], { status: 'pulling manifest' });
  t.match(lines.at(-1), { error: /^not enough disk space for this model: it needs 1000 TB more, [\d.]+ [KMGT]?B are free$/ });
  t.same(await readdir(path.join(app.dataDir, 'models', 'blobs')), [], 'nothing written');
  t.same((await call(app, 'GET', '/api/tags')).body.models, []);
});

t.test('a full disk is a clear error and leaves no half model', async (t) => {
  const { proxy, weights } = await seededRegistry(t);
  const mnt = await mkdtemp(path.join(os.tmpdir(), 'lia-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1536k', 'tmpfs', mnt]);
  } catch (err) {
    throw new Error(`this test mounts a 1.5 MB tmpfs to fill a disk and needs root with CAP_SYS_ADMIN: ${(err as Error).message}`);
  }
  t.teardown(async () => {
    execFileSync('umount', ['-l', mnt]);
    await rm(mnt, { recursive: true, force: true });
  });
  const app = await startStore({ modelsDir: mnt });
  t.teardown(app.close);
  // 1) the space runs out while the blob downloads
  proxy.decide = (req) => (req.method === 'GET' && req.url.includes(weights) ? { kind: 'slow', chunk: 64 * 1024, delayMs: 20 } : { kind: 'pass' });
  const pulling = call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true });
  while (!proxy.requests.some((r) => r.url.includes(weights))) await new Promise((r) => setTimeout(r, 5));
  const filler = path.join(mnt, 'filler');
  await writeFile(filler, Buffer.alloc(1024 * 1024)).catch(() => undefined);
  const lines = ndjson((await pulling).text);
  t.match(lines.at(-1), { error: /no space left on the device|not enough disk space/ });
  t.notOk(existsSync(path.join(mnt, 'manifests', proxy.host)), 'no manifest written');
  t.notOk(existsSync(path.join(mnt, 'blobs', `sha256-${weights.slice(7)}`)), 'no blob visible');
  await rm(filler, { force: true });
  for (const f of await readdir(path.join(mnt, 'blobs'))) await rm(path.join(mnt, 'blobs', f), { force: true });

  // 2) the space is known to be short before anything is written
  await writeFile(filler, Buffer.alloc(1024 * 1024));
  const early = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.equal(early.status, 507);
  t.match(early.body.error, /not enough disk space for this model: it needs 1\.\d MB more, \d+(\.\d)? KB are free/);
  t.same((await call(app, 'GET', '/api/tags')).body.models, []);

  // 3) a blob upload that does not fit
  const upload = await app.fetch(`/api/blobs/${weights}`, { method: 'POST', body: await readFile(fixture(STORIES)) });
  t.equal(upload.status, 507);
  t.match(await upload.json(), { error: /no space left on the device while storing a blob/ });
  t.same(
    (await readdir(path.join(mnt, 'blobs'))).filter((f) => f.endsWith('.tmp')),
    [],
    'no temp file left',
  );
});

t.test('a partial file that cannot be opened fails the pull at once, without retrying the download', async (t) => {
  const { proxy, weights } = await seededRegistry(t);
  const app = await startStore();
  t.teardown(app.close);
  // A directory where the partial file goes: opening it fails with EISDIR.
  await mkdir(path.join(app.dataDir, 'models', 'blobs', `sha256-${weights.slice(7)}-partial`), { recursive: true });
  const res = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true });
  t.match(ndjson(res.text).at(-1), { error: /EISDIR|directory/ });
  const gets = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(weights));
  t.ok(gets.length <= 1, `the blob was requested ${gets.length} time(s): a file error is not retried`);
  t.same((await call(app, 'GET', '/api/tags')).body.models, [], 'no manifest');
});

t.test('a small blob cut mid-way is fetched again; a corrupt one fails at once', async (t) => {
  const { reg, proxy } = await seededRegistry(t);
  const template = `sha256:${createHash('sha256').update('{{ .Prompt }}').digest('hex')}`;
  cutFirstGet(proxy, template, 4);
  const app = await startStore();
  t.teardown(app.close);
  const ok = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.equal(ok.status, 200, 'the pull succeeds after the cut');
  const templateGets = () => proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(template)).length;
  t.equal(templateGets(), 2, 'fetched again once');
  t.equal((await call(app, 'POST', '/api/show', { name: modelName(proxy) })).body.template, '{{ .Prompt }}');

  await call(app, 'DELETE', '/api/delete', { name: modelName(proxy) });
  await writeFile(reg.blobFile(template), '{{ .Prompt }}'.replace('P', 'Q'));
  const before = templateGets();
  const bad = await call(app, 'POST', '/api/pull', { name: modelName(proxy), insecure: true, stream: false });
  t.equal(bad.status, 502);
  t.match(bad.body.error, new RegExp(`digest mismatch, file must be downloaded again: want ${template}`));
  t.equal(templateGets() - before, 1, 'a digest mismatch is not retried');
  t.same((await call(app, 'GET', '/api/tags')).body.models, [], 'no manifest');
});
