/**
 * LIA and a third-party backend as a user installs them: `npm pack` of this project and of
 * `examples/backend-echo`, a production install of both tarballs into an empty project (no
 * devDependencies, nothing from this checkout), a `lia.config.yaml` that enables the backend by
 * package name, then the installed `lia` binary: `--help`, `plugins`, and `serve`, against which
 * an echo model is created and served through `/api/generate`, `/api/chat` and the OpenAI client.
 * The example's JSDoc types are checked against the published declarations of `lia/plugin`, and
 * `lia/testing` runs from the install as a plugin author's test would use it.
 *
 * The install uses npm's cache first (`--prefer-offline`) and reaches the registry for what the
 * cache lacks; a failing npm or network fails the test. Install scripts are skipped: LIA's
 * package.json lists its dependencies' scripts as unneeded (`allowScripts`), and optional
 * dependencies (node-llama-cpp's prebuilt binaries for other platforms) are left out, as LIA's own
 * .npmrc does. It needs `dist/` (built by `npm run build`, which `npm test` runs first).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import t from 'tap';
import { Agent, fetch, type RequestInit } from 'undici';
import { ROOT } from '../helpers/fixtures.js';

const run = promisify(execFile);
const EXAMPLE = path.join(ROOT, 'examples', 'backend-echo');

/** The environment of a user's shell: no npm_config_* of an enclosing `npm test`, no tap or LIA settings. */
const USER_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  ['PATH', 'HOME', 'TMPDIR', 'LANG', 'USER'].filter((k) => process.env[k] !== undefined).map((k) => [k, process.env[k]]),
);

/** Runs a command; a non-zero exit throws with its output, so npm and network failures fail the test loudly. */
async function sh(cmd: string, args: string[], cwd: string, timeout = 240_000): Promise<string> {
  try {
    const { stdout } = await run(cmd, args, { cwd, env: USER_ENV, timeout, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

/** `npm pack` of a folder into `dest`; returns the tarball's path. */
async function pack(folder: string, dest: string): Promise<string> {
  const before = new Set(await readdir(dest));
  await sh('npm', ['pack', folder, '--ignore-scripts', '--pack-destination', dest, '--loglevel=error'], dest);
  const made = (await readdir(dest)).filter((f) => f.endsWith('.tgz') && !before.has(f));
  if (made.length !== 1) throw new Error(`npm pack ${folder} made ${made.length} tarballs`);
  return path.join(dest, made[0]!);
}

/** Starts `lia serve` and resolves once its banner shows the URL (stdout so far included). */
function serve(cwd: string): Promise<{ child: ChildProcess; port: number; banner: string; exited: Promise<number | null> }> {
  const child = spawn(path.join(cwd, 'node_modules', '.bin', 'lia'), ['serve'], { cwd, env: USER_ENV, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`lia serve printed no banner in 60 s:\n${out}\n${err}`)), 60_000);
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const port = /URLs\s+https:\/\/localhost:(\d+)/.exec(out)?.[1];
      // The banner ends with a blank line; wait for it so that every section is in.
      if (port && /URLs[\s\S]*\n\n/.test(out)) {
        clearTimeout(timer);
        resolve({ child, port: Number(port), banner: out, exited });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`lia serve exited with ${code} before its banner:\n${out}\n${err}`));
    });
  });
}

function lines(text: string): any[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

t.test('a production install of lia and lia-backend-echo serves an echo model', async (t) => {
  for (const built of ['dist/core/cli/main.js', 'dist/types/core/index.d.ts', 'dist/types/core/testing/index.d.ts']) {
    if (!existsSync(path.join(ROOT, built))) throw new Error(`${built} is missing: run "npm run build" first (npm test does)`);
  }
  const work = await mkdtemp(path.join(os.tmpdir(), 'lia-pack-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const liaTgz = await pack(ROOT, work);
  const echoTgz = await pack(EXAMPLE, work);
  t.match(path.basename(liaTgz), /^lia-\d+\.\d+\.\d+\.tgz$/);
  t.equal(path.basename(echoTgz), 'lia-backend-echo-1.0.0.tgz');

  const project = path.join(work, 'appliance');
  await mkdir(project);
  await writeFile(path.join(project, 'package.json'), JSON.stringify({ name: 'my-appliance', private: true, type: 'module' }));
  await sh(
    'npm',
    ['install', liaTgz, echoTgz, '--omit=dev', '--omit=optional', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
    project,
  );
  const modules = path.join(project, 'node_modules');
  t.ok(existsSync(path.join(modules, 'lia', 'dist', 'core', 'cli', 'main.js')), 'lia is installed with its built code');
  t.notOk(existsSync(path.join(modules, 'tap')) || existsSync(path.join(modules, 'typescript')), 'no devDependency of lia is installed');
  t.notOk(existsSync(path.join(modules, 'lia', 'core')), 'the TypeScript sources are not shipped');

  await t.test('the example type-checks against the published lia/plugin declarations', async () => {
    const tsc = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const files = ['index.js', 'backend.js'].map((f) => path.join(modules, 'lia-backend-echo', f));
    const args = [
      '--noEmit',
      '--allowJs',
      '--checkJs',
      '--strict',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2023',
      '--skipLibCheck',
    ];
    await sh(process.execPath, [tsc, ...args, '--types', 'node', '--typeRoots', path.join(ROOT, 'node_modules', '@types'), ...files], project);
  });

  await t.test('lia/testing works from the install: a plugin author’s test with the fake backend', async (t) => {
    const script = path.join(project, 'author-test.mjs');
    await writeFile(
      script,
      `import { createFakeModel, FAKE_BACKEND, startTestAppliance } from 'lia/testing';
const app = await startTestAppliance({ plugins: { 'backend-llama-cpp': false, 'backend-transformers': false, 'fake-backend': FAKE_BACKEND } });
try {
  await createFakeModel(app, 'parrot', 'parrot says:');
  const res = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'parrot', prompt: 'hi', stream: false }) });
  const anonymous = await app.fetch('/api/tags', { auth: false });
  console.log(JSON.stringify({ status: res.status, response: (await res.json()).response, anonymous: anonymous.status }));
} finally {
  await app.close();
}
`,
    );
    const out = await sh(process.execPath, [script], project, 60_000);
    t.same(JSON.parse(out), { status: 200, response: 'parrot says: hi', anonymous: 401 });
  });

  await writeFile(
    path.join(project, 'lia.config.yaml'),
    [
      'host: 127.0.0.1',
      'port: 0',
      'dataDir: ./data',
      'logLevel: warn',
      'plugins:',
      '  host-network: { options: { mdns: "off" } }',
      '  host-gpu: false',
      '  gguf: false',
      '  backend-llama-cpp: false',
      '  backend-llama-server: false',
      '  backend-transformers: false',
      '  backend-echo: { module: lia-backend-echo, options: { repeat: 2 } }',
      '',
    ].join('\n'),
  );
  const lia = (...args: string[]) => sh(path.join(modules, '.bin', 'lia'), args, project, 60_000);

  const help = await lia('--help');
  t.match(help, /Usage: lia <command>/);
  t.match(help, /\n {2}serve\s+Run the appliance/);
  t.match(help, /\n {2}pull\s/, 'the built-in plugins’ commands load from the install');
  const plugins = await lia('plugins');
  t.match(plugins, /backend-echo\s+Example backend: "echo" models \(\*\.echo\) answer with the prompt \(lia-backend-echo\)/);
  t.notMatch(plugins, /backend-llama-cpp/, 'disabled plugins are not listed');

  const server = await serve(project);
  t.teardown(async () => {
    if (server.child.exitCode === null) server.child.kill('SIGKILL');
  });
  t.match(server.banner, /Echo models\s+repeat x2/, 'the plugin’s banner section');
  t.match(server.banner, /New key\s+created on this boot/, 'the banner says a master key was created');
  const key = (await lia('key', 'show')).trim();
  t.match(key, /^lia_/, '`lia key show` prints it');
  const ca = await lia('ca', 'export');
  t.match(ca, /^-----BEGIN CERTIFICATE-----/);
  const fingerprint = (await lia('ca', 'fingerprint')).trim();
  t.match(server.banner, fingerprint, 'the exported CA is the one the banner names');

  const agent = new Agent({ connect: { ca } });
  t.teardown(() => agent.close());
  const base = `https://localhost:${server.port}`;
  const api = (pathname: string, init: RequestInit & { key?: string | null } = {}) => {
    const { key: k = key, ...rest } = init;
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(k ? { authorization: `Bearer ${k}` } : {}) };
    return fetch(base + pathname, { ...rest, headers, dispatcher: agent });
  };

  // Create a model of the backend's own format: upload the file, then /api/create with files.
  const text = 'Parrot:';
  const digest = `sha256:${createHash('sha256').update(text).digest('hex')}`;
  const blob = await api(`/api/blobs/${digest}`, { method: 'POST', body: text });
  t.equal(blob.status, 201, 'the blob is stored');
  const created = await api('/api/create', { method: 'POST', body: JSON.stringify({ model: 'parrot', files: { 'parrot.echo': digest }, stream: false }) });
  t.equal(created.status, 200);
  t.same(await created.json(), { status: 'success' });
  const tags = (await (await api('/api/tags')).json()) as { models: unknown[] };
  t.match(tags.models, [{ name: 'parrot:latest', details: { format: 'echo', family: 'echo', parameter_size: '1' } }]);
  const wrong = await api('/api/create', { method: 'POST', body: JSON.stringify({ model: 'other', files: { 'model.gguf': digest }, stream: false }) });
  t.equal(wrong.status, 400);
  t.same(await wrong.json(), { error: '"files" must be one .echo file (echo)' }, 'only formats an enabled backend declares are accepted');

  // /api/generate, streamed as NDJSON by default.
  const gen = await api('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'parrot', prompt: 'hello world' }) });
  t.equal(gen.status, 200);
  t.match(gen.headers.get('content-type'), /application\/x-ndjson/);
  const genLines = lines(await gen.text());
  t.ok(genLines.length > 2, 'streamed in several lines');
  t.equal(genLines.map((l) => l.response).join(''), 'Parrot: hello world hello world');
  t.match(genLines.at(-1), { done: true, done_reason: 'stop', eval_count: 5 });
  const cut = await api('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'parrot', prompt: 'hello world', stream: false, options: { num_predict: 2 } }),
  });
  t.match(await cut.json(), { response: 'Parrot: hello', done_reason: 'length' });

  // /api/chat, streamed.
  const chat = await api('/api/chat', {
    method: 'POST',
    body: JSON.stringify({
      model: 'parrot',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi there' },
      ],
    }),
  });
  t.equal(chat.status, 200);
  const chatLines = lines(await chat.text());
  t.equal(chatLines.map((l) => l.message?.content ?? '').join(''), 'Parrot: hi there hi there');
  t.match(chatLines.at(-1), { done: true, message: { role: 'assistant' } });

  // /v1/chat/completions through the official OpenAI client, plain and streamed.
  const client = new OpenAI({
    baseURL: `${base}/v1`,
    apiKey: key,
    fetch: ((url: string, init: RequestInit) => fetch(url, { ...init, dispatcher: agent })) as unknown as typeof globalThis.fetch,
  });
  const completion = await client.chat.completions.create({ model: 'parrot', messages: [{ role: 'user', content: 'ping' }] });
  t.equal(completion.choices[0]?.message.content, 'Parrot: ping ping');
  t.equal(completion.choices[0]?.finish_reason, 'stop');
  let streamed = '';
  for await (const chunk of await client.chat.completions.create({ model: 'parrot', messages: [{ role: 'user', content: 'pong' }], stream: true })) {
    streamed += chunk.choices[0]?.delta.content ?? '';
  }
  t.equal(streamed, 'Parrot: pong pong');

  // Scopes: the master key holds every scope; without a key, 401 in each surface's format.
  const anonymous = await api('/api/tags', { key: null });
  t.equal(anonymous.status, 401);
  t.match(await anonymous.json(), { error: /missing API key/ });
  const anonymousV1 = await api('/v1/models', { key: null });
  t.equal(anonymousV1.status, 401);
  t.match(await anonymousV1.json(), { error: { message: /missing API key/, type: String } });
  const wrongKey = await api('/api/generate', { key: 'lia_not-the-key', method: 'POST', body: JSON.stringify({ model: 'parrot', prompt: 'x' }) });
  t.equal(wrongKey.status, 401);
  t.equal((await api('/system/status')).status, 200, 'the master key reaches the admin routes');

  server.child.kill('SIGTERM');
  t.equal(await server.exited, 0, 'lia serve stops cleanly on SIGTERM');
});
