/**
 * transformers.js is imported on the first ONNX load, never at start: a child process in which
 * any import of `@huggingface/transformers` or `onnxruntime-*` throws starts the whole appliance
 * with the default plugins, sizes an ONNX model, and only the load itself hits the import.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { fixture, ROOT } from '../helpers/fixtures.js';

const HOOKS = `
export async function resolve(specifier, context, next) {
  if (specifier === '@huggingface/transformers' || specifier.startsWith('onnxruntime')) {
    throw new Error('BLOCKED import of ' + specifier);
  }
  return next(specifier, context);
}
`;

const REGISTER = (hooks: string): string => `
import { register } from 'node:module';
register(${JSON.stringify(pathToFileURL(hooks).href)});
`;

const CHILD = (dir: string): string => `
import { startTestAppliance } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'test/helpers/appliance.ts')).href)};
const out = {};
const app = await startTestAppliance();
try {
  out.tags = (await app.fetch('/api/tags')).status;
  const backend = app.hooks.extensions.get('backends').forFormat('onnx');
  out.backend = backend.name;
  const model = {
    name: 'm', digest: '0'.repeat(64), format: 'onnx', modelPath: ${JSON.stringify(dir)}, sizeBytes: 0,
    parameters: {}, messages: [], capabilities: ['embedding'], details: {},
  };
  out.estimate = (await backend.estimateMemory(model, { parallel: 1, threads: 1 })).totalBytes;
  out.load = await backend.load(model, { parallel: 1, threads: 1 }).then(() => 'loaded', (err) => String(err.message));
} finally {
  await app.close();
}
console.log(JSON.stringify(out));
`;

t.test('the appliance starts and sizes ONNX models without importing transformers.js', async (t) => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'lia-lazy-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  await writeFile(path.join(tmp, 'hooks.mjs'), HOOKS);
  await writeFile(path.join(tmp, 'register.mjs'), REGISTER(path.join(tmp, 'hooks.mjs')));
  await writeFile(path.join(tmp, 'child.mts'), CHILD(fixture('onnx/tiny-random-minilm')));
  const child = spawn(process.execPath, ['--import', 'tsx', '--import', path.join(tmp, 'register.mjs'), path.join(tmp, 'child.mts')], {
    cwd: ROOT,
    env: { ...process.env, LIA_LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  t.equal(code, 0, `child exited cleanly: ${stderr.slice(-2000)}`);
  if (code !== 0) return;
  const line = stdout.trim().split('\n').pop() ?? '{}';
  const out = JSON.parse(line) as { tags: number; backend: string; estimate: number; load: string };
  t.equal(out.tags, 200, 'the appliance answers');
  t.equal(out.backend, 'transformers', 'the onnx backend is registered');
  t.ok(out.estimate > 4_000_000, 'memory is estimated from the files alone');
  t.match(out.load, /BLOCKED import of @huggingface\/transformers/, 'the first load is what imports the library');
});
