import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { Ollama } from 'ollama';
import { fetch as undiciFetch } from 'undici';
import type { TestAppliance } from '../helpers/appliance.js';
import { fixture } from '../helpers/fixtures.js';
import { createModel, fileDigest } from '../helpers/models.js';
import { startTestRegistry, type TestRegistry } from '../helpers/registry.js';
import { startProxy } from './proxy.js';
import { call, ndjson, startStore } from './setup.js';

const STORIES = 'gguf/stories260K.gguf';

function ollamaClient(app: TestAppliance): Ollama {
  const dispatcher = app.dispatcher();
  return new Ollama({
    host: app.url,
    headers: { Authorization: `Bearer ${app.key}` },
    fetch: ((url: string, init: object) => undiciFetch(url, { ...init, dispatcher })) as unknown as typeof fetch,
  });
}

/** Creates stories and pushes it to the registry as `<registry>/library/stories:latest`. */
async function seed(app: TestAppliance, reg: TestRegistry): Promise<string> {
  await createModel(app, 'stories', STORIES, { template: '{{ .Prompt }}', parameters: { temperature: 0.1 } });
  const name = `${reg.host}/library/stories:latest`;
  const copied = await call(app, 'POST', '/api/copy', { source: 'stories', destination: name });
  if (copied.status !== 200) throw new Error(`copy failed: ${copied.text}`);
  return name;
}

t.test('create + push, delete, pull back with the ollama client', async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const app = await startStore();
  t.teardown(app.close);
  const name = await seed(app, reg);
  const ollama = ollamaClient(app);

  const pushed: Array<{ status: string; digest?: string; total?: number; completed?: number }> = [];
  for await (const p of await ollama.push({ model: name, insecure: true, stream: true })) pushed.push(p);
  t.equal(pushed[0]?.status, 'retrieving manifest');
  t.equal(pushed.at(-1)?.status, 'success');
  t.ok(pushed.some((p) => p.status === 'pushing manifest'));
  const digest = await fileDigest(fixture(STORIES));
  t.ok(
    pushed.some((p) => p.digest === digest && p.completed === p.total),
    'weights pushed',
  );
  // The registry really has it, under the manifest we stored.
  const regManifest = await fetch(`${reg.url}/v2/library/stories/manifests/latest`, {
    headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' },
  });
  t.equal(regManifest.status, 200);
  const regDigest = regManifest.headers.get('docker-content-digest');

  await ollama.delete({ model: name });
  await ollama.delete({ model: 'stories' });
  t.same(await readdir(path.join(app.dataDir, 'models', 'blobs')), [], 'store empty before the pull');

  const lines: Array<{ status: string; digest?: string; total?: number; completed?: number }> = [];
  for await (const p of await ollama.pull({ model: name, insecure: true, stream: true })) lines.push(p);
  t.same(lines[0], { status: 'pulling manifest' });
  t.same(lines.at(-1), { status: 'success' });
  const middle = lines.slice(1, -1);
  t.ok(middle.length >= 6, 'start and end line for each of 4 blobs');
  for (const l of middle) {
    t.equal(l.status, 'pulling layer');
    t.match(l, { digest: /^sha256:[0-9a-f]{64}$/, total: Number, completed: Number });
  }
  // layer by layer: completed never goes back, each ends at its total
  const byDigest = new Map<string, number[]>();
  for (const l of middle) byDigest.set(l.digest!, [...(byDigest.get(l.digest!) ?? []), l.completed!]);
  t.equal(byDigest.size, 4, 'model, template, params and the config blob');
  for (const [d, seq] of byDigest) {
    t.same(
      [...seq].sort((a, b) => a - b),
      seq,
      `${d} monotonic`,
    );
    t.equal(seq.at(-1), middle.find((l) => l.digest === d)!.total, `${d} complete`);
  }
  const order = [...byDigest.keys()];
  const firstIndex = order.map((d) => middle.findIndex((l) => l.digest === d));
  t.same(
    [...firstIndex].sort((a, b) => a - b),
    firstIndex,
    'layers come one after another',
  );

  const tags = await call(app, 'GET', '/api/tags');
  t.equal(tags.body.models.length, 1);
  t.match(tags.body.models[0], { name, details: { format: 'gguf', family: 'llama', parameter_size: '293K', quantization_level: 'F32' } });
  t.equal(`sha256:${tags.body.models[0].digest}`, regDigest, 'manifest stored byte for byte');
  const r = await app.hooks.extensions.get('models').resolve(name);
  t.equal(await fileDigest(r.modelPath), digest, 'the weights arrived intact');
  t.same(r.parameters, { temperature: 0.1 });
  const blobs = await readdir(path.join(app.dataDir, 'models', 'blobs'));
  t.notOk(
    blobs.some((b) => b.includes('partial')),
    'no partial files left',
  );

  // Pulling again: every layer already there, one line each.
  const again = ndjson((await call(app, 'POST', '/api/pull', { name, insecure: true })).text);
  t.equal(again.length, 6);
  for (const l of again.slice(1, -1)) t.equal(l.completed, l.total);

  // stream: false gives only the last object
  const flat = await call(app, 'POST', '/api/pull', { model: name, insecure: true, stream: false });
  t.equal(flat.status, 200);
  t.same(flat.body, { status: 'success' });
});

t.test('pull failures: clear 4xx before the stream, error lines after', async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const html = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Welcome to nginx</body></html>'));
  await new Promise<void>((r) => html.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => html.close(r)));
  const htmlHost = `127.0.0.1:${(html.address() as AddressInfo).port}`;
  // accepts connections and never answers
  const silent = http.createServer(() => undefined);
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    silent.closeAllConnections();
    return new Promise((r) => silent.close(r));
  });
  const silentHost = `127.0.0.1:${(silent.address() as AddressInfo).port}`;

  const app = await startStore({ registryTimeoutMs: 800 });
  t.teardown(app.close);

  const before: Array<[unknown, number, RegExp]> = [
    [{}, 400, /model is required/],
    [{ name: 7 }, 400, /"name" must be a string/],
    [{ name: 'bad name!' }, 400, /invalid model name/],
    [{ name: `http://${reg.host}/library/x` }, 400, /insecure protocol http/],
    [{ name: 'x', insecure: 'yes' }, 400, /"insecure" must be a boolean/],
  ];
  for (const [body, status, error] of before) {
    const res = await call(app, 'POST', '/api/pull', body);
    t.equal(res.status, status, JSON.stringify(body));
    t.match(res.body.error, error);
  }
  const huge = await call(app, 'POST', '/api/pull', JSON.stringify({ name: 'x', pad: 'x'.repeat(20 * 1024 * 1024) }));
  t.equal(huge.status, 413, 'huge body');

  const streamed: Array<[string, RegExp, number]> = [
    [`${reg.host}/library/ghost:latest`, /not found/, 404],
    [`${htmlHost}/library/x:latest`, /HTML page, not a model manifest/, 502],
    [`no-such-host.invalid/library/x:latest`, /registry host "no-such-host.invalid" is unknown/, 400],
    [`${silentHost}/library/x:latest`, /did not answer in time/, 504],
  ];
  for (const [name, error, status] of streamed) {
    const res = await call(app, 'POST', '/api/pull', { name, insecure: true });
    t.equal(res.status, 200, `${name}: the stream had started`);
    const lines = ndjson(res.text);
    t.same(lines[0], { status: 'pulling manifest' });
    t.match(lines.at(-1), { error }, name);
    t.equal(lines.length, 2);
    const flat = await call(app, 'POST', '/api/pull', { name, insecure: true, stream: false });
    t.equal(flat.status, status, `${name} with stream:false`);
    t.match(flat.body, { error });
  }
  t.same((await call(app, 'GET', '/api/tags')).body.models, [], 'nothing half-pulled');
  // push of an unknown model is a 404 before any stream
  const push = await call(app, 'POST', '/api/push', { name: 'ghost', insecure: true });
  t.equal(push.status, 404);
});

t.test('two pulls of one model share one download', async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const seeder = await startStore();
  t.teardown(seeder.close);
  const name = await seed(seeder, reg);
  t.equal((await call(seeder, 'POST', '/api/push', { name, insecure: true, stream: false })).status, 200);

  const proxy = await startProxy(reg.port);
  t.teardown(proxy.close);
  const weights = await fileDigest(fixture(STORIES));
  // Slow the weights down so the second pull arrives while the first is downloading.
  proxy.decide = (req) => (req.url.includes(weights) ? { kind: 'slow', chunk: 64 * 1024, delayMs: 40 } : { kind: 'pass' });
  const app = await startStore();
  t.teardown(app.close);
  const viaProxy = name.replace(reg.host, proxy.host);
  const a = call(app, 'POST', '/api/pull', { name: viaProxy, insecure: true });
  while (!proxy.requests.some((r) => r.url.includes(weights))) await new Promise((r) => setTimeout(r, 10));
  const b = call(app, 'POST', '/api/pull', { name: viaProxy, insecure: true });
  const [linesA, linesB] = [ndjson((await a).text), ndjson((await b).text)];
  t.same(linesA.at(-1), { status: 'success' });
  t.same(linesB.at(-1), { status: 'success' });
  const joined = linesB.filter((l) => l.digest === weights);
  t.ok(joined.length >= 2 && joined[0].completed < joined[0].total, 'the second pull joined the running download and saw it progress');
  const gets = proxy.requests.filter((r) => r.method === 'GET' && r.url.includes(weights));
  t.equal(gets.length, 1, 'the weights were fetched once');
  const ticks = linesA.filter((l) => l.digest === weights).length;
  t.ok(ticks >= 5, `progress ticks while downloading (${ticks})`);
  const r = await app.hooks.extensions.get('models').resolve(viaProxy);
  t.equal(await fileDigest(r.modelPath), weights);
});

t.test('ONNX models travel through the registry too', async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const app = await startStore();
  t.teardown(app.close);
  await createModel(app, 'minilm', 'onnx/tiny-random-minilm');
  const name = `${reg.host}/emb/minilm:v1`;
  await call(app, 'POST', '/api/copy', { source: 'minilm', destination: name });
  t.same((await call(app, 'POST', '/api/push', { name, insecure: true, stream: false })).body, { status: 'success' });
  await call(app, 'DELETE', '/api/delete', { name });
  await call(app, 'DELETE', '/api/delete', { name: 'minilm' });
  t.same((await call(app, 'POST', '/api/pull', { name, insecure: true, stream: false })).body, { status: 'success' });
  const r = await app.hooks.extensions.get('models').resolve(name);
  t.equal(r.format, 'onnx');
  t.equal(await readFile(path.join(r.modelPath, 'tokenizer.json'), 'utf8'), await readFile(fixture('onnx/tiny-random-minilm/tokenizer.json'), 'utf8'));
});
