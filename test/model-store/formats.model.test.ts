/**
 * Backends bring their model formats: a test backend for the invented `echo` format (one `*.echo`
 * text file, test/fixtures/plugins/echo) is created, listed, shown and generated from through the
 * real API, with the llama.cpp and ONNX backends off; without it the model stays listed and
 * loading it is a 400 naming the format. Two enabled backends for one format stop the start
 * (exit code 2) unless the configuration's `backends` picks one, and then that one serves.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../core/config/load.js';
import type { PluginEntry } from '../../core/config/schema.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { call, ndjson } from './setup.js';

const ECHO = path.resolve('test/fixtures/plugins/echo/index.ts');
const TWIN = path.resolve('test/fixtures/plugins/echo-twin/index.ts');
const TEXT = 'Once upon a time an echo answered';

/** The store and the engine, no built-in backend. */
const ECHO_ONLY: Record<string, PluginEntry> = {
  'host-network': false,
  'host-gpu': false,
  'host-services': false,
  gguf: false,
  'backend-llama-cpp': false,
  'backend-llama-server': false,
  'backend-transformers': false,
  'api-openai': false,
  webui: false,
  echo: { module: ECHO },
};

async function upload(app: TestAppliance, bytes: string): Promise<string> {
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const res = await app.fetch(`/api/blobs/${digest}`, { method: 'POST', body: bytes });
  if (res.status !== 201 && res.status !== 200) throw new Error(`upload: ${res.status}`);
  return digest;
}

async function generate(app: TestAppliance, model: string): Promise<{ status: number; body: any }> {
  return call(app, 'POST', '/api/generate', { model, prompt: 'say it', stream: false });
}

t.test('a backend for a new format: create, list, show and generate', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-formats-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const app = await startTestAppliance({ dataDir, plugins: ECHO_ONLY });
  t.teardown(app.close);

  const digest = await upload(app, TEXT);
  const created = await call(app, 'POST', '/api/create', { model: 'parrot', files: { 'parrot.echo': digest } });
  t.equal(created.status, 200);
  t.same(
    ndjson(created.text)
      .map((l) => l.status)
      .filter((s) => !s.startsWith('using')),
    ['reading model metadata', 'parsing ECHO', 'writing manifest', 'success'],
  );

  const tags = await call(app, 'GET', '/api/tags');
  t.match(tags.body.models, [
    { name: 'parrot:latest', details: { format: 'echo', family: 'echo', families: ['echo'], parameter_size: '7', quantization_level: 'text' } },
  ]);
  const show = await call(app, 'POST', '/api/show', { model: 'parrot' });
  t.equal(show.status, 200);
  t.match(show.body, { details: { format: 'echo', family: 'echo', parameter_size: '7' }, capabilities: ['completion'], model_info: { 'echo.words': 7 } });

  const res = await generate(app, 'parrot');
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.match(res.body, { model: 'parrot', response: TEXT, done: true, eval_count: 7 });

  // Only formats an enabled backend serves are accepted, and the error says which.
  const gguf = await upload(app, 'GGUF, or so it says');
  const refused = await call(app, 'POST', '/api/create', { model: 'other', files: { 'model.gguf': gguf } });
  t.equal(refused.status, 400);
  t.same(refused.body, { error: '"files" must be one .echo file (echo)' });
  const two = await call(app, 'POST', '/api/create', { model: 'other', files: { 'a.echo': digest, 'b.echo': digest } });
  t.equal(two.status, 400);
  t.same(two.body, { error: 'an echo model is exactly one .echo file' });
  const empty = await upload(app, '   ');
  const bad = await call(app, 'POST', '/api/create', { model: 'other', files: { 'x.echo': empty }, stream: false });
  t.equal(bad.status, 400);
  t.same(bad.body, { error: 'the .echo file has no words' });
  await app.close();

  // The same store without the echo backend: still listed with what was recorded, a 400 on load.
  const without = await startTestAppliance({ dataDir, plugins: { ...ECHO_ONLY, echo: false } });
  t.teardown(without.close);
  const listed = await call(without, 'GET', '/api/tags');
  t.match(listed.body.models, [{ name: 'parrot:latest', details: { format: 'echo', family: 'echo', parameter_size: '7' } }]);
  const shown = await call(without, 'POST', '/api/show', { model: 'parrot' });
  t.equal(shown.status, 200);
  t.match(shown.body, { details: { format: 'echo', family: 'echo' }, capabilities: [] });
  const unserved = await generate(without, 'parrot');
  t.equal(unserved.status, 400);
  t.same(unserved.body, { error: 'no enabled inference backend runs models in the "echo" format' });
});

t.test('two backends for one format: the start stops naming both; the config picks one', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-formats-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const both = { ...ECHO_ONLY, 'echo-twin': { module: TWIN } };

  const failed = await startTestAppliance({ dataDir, plugins: both }).then(
    (app) => app.close().then(() => null),
    (err: unknown) => err,
  );
  t.ok(failed instanceof ConfigError, 'a ConfigError (exit code 2)');
  t.match((failed as Error).message, /2 enabled backends serve the "echo" format: "echo" and "twin" \(plugin "echo-twin"\); choose one with "backends\.echo"/);

  const app = await startTestAppliance({ dataDir, plugins: both, env: { LIA_BACKENDS: 'echo=echo-twin' } });
  t.teardown(app.close);
  const created = await call(app, 'POST', '/api/create', { model: 'parrot', files: { 'parrot.echo': await upload(app, TEXT) }, stream: false });
  t.equal(created.status, 200, created.text);
  const show = await call(app, 'POST', '/api/show', { model: 'parrot' });
  t.match(show.body.details, { format: 'echo', family: 'twin' }, 'the chosen backend describes it');
  const res = await generate(app, 'parrot');
  t.equal(res.body.response, TEXT.toUpperCase(), 'and serves it');
  t.equal(app.hooks.extensions.get('backends').forFormat('echo').name, 'twin');
});

t.test('lia serve with two backends for one format exits 2 naming both', async (t) => {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-formats-'));
  t.teardown(() => rm(cwd, { recursive: true, force: true }));
  const plugins = Object.entries({ ...ECHO_ONLY, 'echo-twin': { module: TWIN } })
    .map(([name, entry]) => `  ${name}: ${JSON.stringify(entry)}`)
    .join('\n');
  await writeFile(path.join(cwd, 'lia.config.yaml'), `dataDir: ./data\nlogLevel: silent\nplugins:\n${plugins}\n`);
  const result = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [path.resolve('bin/lia.js'), 'serve', '--host', '127.0.0.1', '--port', '0'],
      { cwd, env: { ...process.env, LIA_FROM_SOURCE: '1' } },
      (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? null) : 0, stderr }),
    );
  });
  t.equal(result.code, 2);
  t.match(
    result.stderr,
    /lia: invalid configuration: .*lia\.config\.yaml: 2 enabled backends serve the "echo" format: "echo" and "twin" \(plugin "echo-twin"\)/,
  );
});

t.test('the backends key: in a file, in LIA_BACKENDS, checked', async (t) => {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-formats-'));
  t.teardown(() => rm(cwd, { recursive: true, force: true }));
  await writeFile(path.join(cwd, 'lia.config.yaml'), 'backends:\n  gguf: backend-llama-cpp\n');
  t.same((await loadConfig({ cwd, env: {} })).backends, { gguf: 'backend-llama-cpp' });
  t.same((await loadConfig({ cwd, env: { LIA_BACKENDS: 'echo=twin, onnx=transformers' } })).backends, { echo: 'twin', onnx: 'transformers' });
  await t.rejects(loadConfig({ cwd, env: { LIA_BACKENDS: 'echo' } }), /LIA_BACKENDS: "backends" entries are FORMAT=BACKEND/);
  await writeFile(path.join(cwd, 'lia.config.yaml'), 'backends:\n  gguf: 3\n');
  await t.rejects(loadConfig({ cwd, env: {} }), /"backends\.gguf" expected string/);

  // A choice must name an enabled backend of that format.
  const dataDir = path.join(cwd, 'data');
  await mkdir(dataDir);
  const failed = await startTestAppliance({ dataDir, plugins: ECHO_ONLY, env: { LIA_BACKENDS: 'echo=llama-cpp' } }).then(
    (app) => app.close().then(() => null),
    (err: unknown) => err,
  );
  t.ok(failed instanceof ConfigError);
  t.match((failed as Error).message, /"backends\.echo" names "llama-cpp", but the "echo" format is served by "echo"/);
});
