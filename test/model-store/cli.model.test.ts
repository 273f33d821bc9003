import { spawn } from 'node:child_process';
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { TestAppliance } from '../helpers/appliance.js';
import { fixture, ROOT } from '../helpers/fixtures.js';
import { startTestRegistry } from '../helpers/registry.js';
import { main } from '../../core/cli/main.js';
import { call, startStore } from './setup.js';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { TINY_LORA_BASE } from '../../scripts/fixtures/tiny-lora.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function lia(app: TestAppliance, caFile: string, args: string[], cwd: string): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'lia.js'), ...args], {
      cwd,
      env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: caFile },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The same commands in this process through the CLI's `main` (same parsing, client and output;
 * no process start), for the many steps where the exit path is not what is being tested.
 */
async function liaIn(app: TestAppliance, caFile: string, args: string[], cwd: string): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const out = { write: (c: string) => ((stdout += c), true), isTTY: false } as unknown as NodeJS.WritableStream;
  const err = { write: (c: string) => ((stderr += c), true), isTTY: false } as unknown as NodeJS.WritableStream;
  const previous = process.cwd();
  process.chdir(cwd);
  try {
    const code = await main(args, { stdout: out, stderr: err, env: { ...process.env, LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: caFile } });
    return { code, stdout, stderr };
  } finally {
    process.chdir(previous);
  }
}

/** A store appliance, a scratch folder (removed when `t` ends) and the appliance's CA file in it. */
async function cliStore(t: Test): Promise<{ app: TestAppliance; dir: string; ca: string }> {
  const app = await startStore();
  t.teardown(app.close);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const ca = path.join(dir, 'ca.pem');
  await writeFile(ca, app.ca);
  return { app, dir, ca };
}

t.test('lia create, list, show, cp, push, rm, pull', { timeout: 120_000 }, async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const { app, dir, ca } = await cliStore(t);
  await symlink(fixture('gguf/stories260K.gguf'), path.join(dir, 'stories.gguf'));
  await writeFile(
    path.join(dir, 'Modelfile'),
    [
      'FROM ./stories.gguf',
      'TEMPLATE """{{ .System }}',
      '{{ .Prompt }}"""',
      'SYSTEM Tell a short story.',
      'PARAMETER temperature 0.3',
      'PARAMETER stop "The end"',
      'LICENSE MIT',
      'MESSAGE user Once upon a time',
      '',
    ].join('\n'),
  );
  // Spawned: the commands whose process behaviour (exit code, stderr) matters most.
  const spawned = (...args: string[]) => lia(app, ca, args, dir);
  const run = (...args: string[]) => liaIn(app, ca, args, dir);

  const created = await spawned('create', 'story');
  t.equal(created.code, 0, created.stderr);
  t.match(created.stderr, /uploading stories\.gguf \(1\.2 MB\)/);
  t.match(created.stderr, /writing manifest\nsuccess\n$/);

  const list = await run('list');
  t.equal(list.code, 0);
  t.match(list.stdout, /^NAME\s+ID\s+SIZE\s+MODIFIED\n/);
  t.match(list.stdout, /\nstory:latest\s+[0-9a-f]{12}\s+1\.2 MB\s+(Less than a second ago|\d+ seconds ago|A second ago)\n/);

  const show = await run('show', 'story');
  t.equal(show.code, 0);
  t.match(
    show.stdout,
    /Model\n\s+architecture\s+llama\n\s+format\s+gguf\n\s+parameters\s+293K\n\s+context length\s+2048\n\s+embedding length\s+64\n\s+quantization\s+F32/,
  );
  t.match(show.stdout, /Capabilities\n\s+completion/);
  t.match(show.stdout, /Parameters\n\s+temperature\s+0\.3\n\s+stop\s+"The end"/);
  t.match(show.stdout, /License\n\s+MIT/);
  t.match((await run('show', 'story', '--modelfile')).stdout, /MESSAGE user """Once upon a time"""/);

  const name = `${reg.host}/library/story:v1`;
  t.equal((await run('cp', 'story', name)).code, 0);
  const pushed = await run('push', name, '--insecure');
  t.equal(pushed.code, 0, pushed.stderr);
  t.match(pushed.stderr, /^retrieving manifest\n/);
  t.match(pushed.stderr, /pushing [0-9a-f]{12} 100% ▕█+▏ 1\.2 MB\/1\.2 MB/);
  t.match(pushed.stderr, /pushing manifest\nsuccess\n$/);

  const removed = await run('rm', name, 'story');
  t.equal(removed.code, 0);
  t.equal(removed.stdout, `deleted '${name}'\ndeleted 'story'\n`);
  t.same((await call(app, 'GET', '/api/tags')).body.models, []);

  const pulled = await spawned('pull', name, '--insecure');
  t.equal(pulled.code, 0, pulled.stderr);
  t.match(pulled.stderr, /^pulling manifest\n/);
  t.match(pulled.stderr, /pulling [0-9a-f]{12} 100% ▕█+▏ 1\.2 MB\/1\.2 MB {2}\d+(\.\d)? [KMG]?B\/s\n/);
  t.match(pulled.stderr, /\nsuccess\n$/);
  t.match((await run('list')).stdout, new RegExp(`${reg.host.replace(/\./g, '\\.')}/library/story:v1`));

  // failures: a clear message and a non-zero exit
  const missing = await spawned('show', 'ghost');
  t.equal(missing.code, 1);
  t.match(missing.stderr, /lia show: 404 model 'ghost:latest' not found/);
  await writeFile(path.join(dir, 'Bad'), 'FROM ./stories.gguf\nPARAMETR x 1\n');
  const bad = await run('create', 'x', '-f', 'Bad');
  t.equal(bad.code, 1);
  t.match(bad.stderr, /line 2: unknown instruction "PARAMETR"/);
  const badPull = await run('pull', `${reg.host}/library/ghost`, '--insecure');
  t.equal(badPull.code, 1);
  t.match(badPull.stderr, /not found/);
});

t.test('lia create from an ONNX folder', async (t) => {
  const { app, dir, ca } = await cliStore(t);
  await writeFile(path.join(dir, 'Modelfile'), `FROM ${fixture('onnx/tiny-random-minilm')}\n`);
  const res = await lia(app, ca, ['create', 'minilm'], dir);
  t.equal(res.code, 0, res.stderr);
  const show = await call(app, 'POST', '/api/show', { model: 'minilm' });
  t.match(show.body, { details: { format: 'onnx', family: 'bert' }, capabilities: ['embedding'] });
});

t.test('lia create from a VITS folder: a speech model with its voices', async (t) => {
  const { app, dir, ca } = await cliStore(t);
  await writeFile(path.join(dir, 'Modelfile'), `FROM ${await builtFixture('tiny-vits')}\n`);
  const res = await liaIn(app, ca, ['create', 'voice'], dir);
  t.equal(res.code, 0, res.stderr);
  const show = await call(app, 'POST', '/api/show', { model: 'voice' });
  t.match(show.body, { details: { format: 'onnx', family: 'vits' }, capabilities: ['speech'], voices: ['loud', 'quiet'] });
});

t.test('lia create with an ADAPTER line uploads the adapter and makes a model of the base with it', async (t) => {
  const { app, dir, ca } = await cliStore(t);
  await writeFile(path.join(dir, 'Modelfile'), `FROM ${fixture(TINY_LORA_BASE)}\n`);
  t.equal((await liaIn(app, ca, ['create', 'base'], dir)).code, 0);
  await writeFile(path.join(dir, 'Tuned'), `FROM base\nADAPTER ${await builtFixture('tiny-lora-a.gguf')}\n`);
  const res = await liaIn(app, ca, ['create', 'tuned', '-f', 'Tuned'], dir);
  t.equal(res.code, 0, res.stderr);
  const show = await call(app, 'POST', '/api/show', { model: 'tuned' });
  t.match(show.body, { details: { parent_model: 'base:latest' }, modelfile: /\nADAPTER \S+sha256-[0-9a-f]{64}\n/ });
  await writeFile(path.join(dir, 'Missing'), 'FROM base\nADAPTER ./nowhere.gguf\n');
  const missing = await liaIn(app, ca, ['create', 'x', '-f', 'Missing'], dir);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /ADAPTER \.\/nowhere\.gguf: an adapter must name a file/);
});

t.test('lia create with a DRAFT line: a file becomes a model of its own, a name is kept, another vocabulary is refused', async (t) => {
  const { app, dir, ca } = await cliStore(t);
  await writeFile(path.join(dir, 'Modelfile'), `FROM ${fixture('gguf/stories260K.gguf')}\nDRAFT ${fixture('gguf/stories260K-chatml.gguf')}\n`);
  const res = await liaIn(app, ca, ['create', 'story'], dir);
  t.equal(res.code, 0, res.stderr);
  const show = await call(app, 'POST', '/api/show', { model: 'story' });
  t.match(show.body, { modelfile: /\nDRAFT story-draft\n/ }, 'the file was created as story-draft and named by the DRAFT line');
  t.equal((await call(app, 'POST', '/api/show', { model: 'story-draft' })).status, 200);
  await writeFile(path.join(dir, 'Named'), 'FROM story\nDRAFT story-draft\n');
  t.equal((await liaIn(app, ca, ['create', 'again', '-f', 'Named'], dir)).code, 0, 'a DRAFT naming a stored model');
  await writeFile(path.join(dir, 'Other'), `FROM ${fixture('gguf/tinystories-656k-q8_0.gguf')}\n`);
  t.equal((await liaIn(app, ca, ['create', 'other', '-f', 'Other'], dir)).code, 0);
  await writeFile(path.join(dir, 'Mixed'), 'FROM story\nDRAFT other\n');
  const mixed = await liaIn(app, ca, ['create', 'mixed', '-f', 'Mixed'], dir);
  t.equal(mixed.code, 1);
  t.match(mixed.stderr, /"other:latest" cannot draft for "mixed:latest": their vocabularies differ \(512 tokens against 2048\)/);
});
