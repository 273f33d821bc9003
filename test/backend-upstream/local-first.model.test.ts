/**
 * A local model is never shadowed by a remote one. `lia serve` (a real process, its JSON log read
 * as an operator reads it) has a local `stories` (stories260K-chatml.gguf, on llama.cpp) and an
 * upstream that serves a `stories` too, by configuration at the start and by discovery later. On
 * every surface `stories` is the local model; the remote one answers only under the name the
 * operator gave it; the start and the refresh that finds the collision log a warning naming the
 * local model, the upstream and its model.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Agent, fetch, Headers, type RequestInit } from 'undici';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';
import { waitFor } from '../helpers/wait.js';
import { FakeUpstream, FRONT_UNUSED, sseFrames } from './fake-upstream.js';

const LIA = path.join(ROOT, 'bin', 'lia.js');
const json = { 'content-type': 'application/json' };
/** The front keeps the llama.cpp backend for its local model. */
const PLUGINS = { ...FRONT_UNUSED, 'backend-llama-cpp': true };

const fake = await new FakeUpstream('gpu', 'openai', ['big']).start();
t.teardown(() => fake.close());

const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-local-first-'));
t.teardown(() => rm(cwd, { recursive: true, force: true }));
const dataDir = path.join(cwd, 'data');

// The local model is there before the upstreams are configured, as on a box that gets a GPU server
// beside it later.
const before = await startTestAppliance({ dataDir, plugins: PLUGINS });
try {
  await createModel(before, 'stories', 'gguf/stories260K-chatml.gguf');
} finally {
  await before.close();
}

const plugins = Object.entries(PLUGINS)
  .map(([name, on]) => `  ${name}: ${on}`)
  .join('\n');
await writeFile(
  path.join(cwd, 'lia.config.yaml'),
  `logLevel: info
plugins:
${plugins}
  backend-upstream:
    options:
      health_interval_ms: 200
      upstreams:
        - name: gpu-pinned        # names the local model's name at the start
          url: ${fake.url}
          flavour: openai
          models: [stories, { model: stories, name: gpu-stories }]
        - name: gpu               # discovers it later
          url: ${fake.url}
          flavour: openai
          discover: true
          refresh_ms: 1000
`,
);

const child: ChildProcess = spawn(process.execPath, [LIA, 'serve', '--host', '127.0.0.1', '--port', '0'], {
  cwd,
  env: { ...process.env, LIA_DATA_DIR: dataDir, LIA_LOG_FORMAT: 'json' },
});
let out = '';
child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
t.teardown(
  () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    }),
);
await waitFor('lia serve to start', () => (out.includes('upstreams ready') && out.includes('listening at')) || child.exitCode !== null, { timeoutMs: 60_000 });
if (child.exitCode !== null) throw new Error(`lia serve exited with ${child.exitCode}: ${out}`);

const port = /listening at https:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1];
const agent = new Agent({ connect: { ca: await readFile(path.join(dataDir, 'pki', 'root.crt'), 'utf8') } });
t.teardown(() => agent.close());
const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
const front = {
  fetch: (p: string, init: RequestInit = {}) => {
    const headers = new Headers(init.headers);
    headers.set('authorization', `Bearer ${key}`);
    return fetch(`https://127.0.0.1:${port}${p}`, { ...init, headers, dispatcher: agent });
  },
};

interface LogLine {
  level: number;
  msg?: string;
  model?: string;
  upstream?: string;
  remote_model?: string;
}
const logLines = (): LogLine[] =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
const shadowWarnings = (upstream: string) => logLines().filter((l) => l.level === 40 && l.upstream === upstream && /keeps its name/.test(l.msg ?? ''));

type Tag = { name: string; remote_host?: string; remote_model?: string; details: { format: string } };
const tags = async (): Promise<Tag[]> => ((await (await front.fetch('/api/tags')).json()) as { models: Tag[] }).models;

const ollamaChat = async (model: string) => {
  const res = await front.fetch('/api/chat', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Once upon a time' }], stream: false, options: { num_predict: 4 } }),
  });
  return { status: res.status, body: (await res.json()) as { model?: string; message?: { content: string }; error?: string } };
};
const openaiChat = async (model: string) => {
  const res = await front.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 4, stream: true }),
  });
  return { status: res.status, frames: sseFrames(await res.text()) };
};
const text = (frames: Array<Record<string, unknown>>) =>
  frames.map((f) => (f['choices'] as Array<{ delta?: { content?: string } }> | undefined)?.[0]?.delta?.content ?? '').join('');

/** Checks that `stories` is the local model on both chat surfaces and that nothing reached the upstream. */
async function storiesIsLocal(t: Test): Promise<void> {
  const chatsBefore = fake.chats().length;
  const a = await ollamaChat('stories');
  t.equal(a.status, 200, `/api/chat: ${JSON.stringify(a.body)}`);
  t.notMatch(a.body.message?.content ?? '', /from gpu/, '/api/chat: not the upstream answer');
  const b = await openaiChat('stories');
  t.equal(b.status, 200, '/v1/chat/completions');
  t.notMatch(text(b.frames), /from gpu/, '/v1/chat/completions: not the upstream answer');
  t.equal(fake.chats().length, chatsBefore, 'no chat request reached the upstream');
}

t.test('at the start: the local model keeps its name, the warning names both', async (t) => {
  const warned = shadowWarnings('gpu-pinned');
  t.equal(warned.length, 1, `one warning at the start: ${JSON.stringify(warned)}`);
  t.match(warned[0], { model: 'stories:latest', upstream: 'gpu-pinned', remote_model: 'stories' });
  t.match(warned[0]?.msg, /"stories:latest".*"gpu-pinned".*"stories"/, 'the message names the local model, the upstream and its model');

  const listed = await tags();
  const stories = listed.filter((m) => m.name === 'stories:latest');
  t.equal(stories.length, 1, '/api/tags shows stories once');
  t.equal(stories[0]?.details.format, 'gguf', 'as the local model');
  t.notOk(stories[0]?.remote_host, 'without a remote host');
  t.match(
    listed.find((m) => m.name === 'gpu-stories:latest'),
    { remote_host: fake.url, remote_model: 'stories', details: { format: 'upstream' } },
    'the remote one under the name the operator gave it',
  );
  t.match(
    listed.find((m) => m.name === 'big:latest'),
    { remote_model: 'big' },
    'a remote model without a collision is listed as it is',
  );

  const v1 = (await (await front.fetch('/v1/models')).json()) as { data: Array<{ id: string }> };
  t.same(
    v1.data.map((m) => m.id).filter((id) => id.startsWith('stories')),
    ['stories:latest'],
    '/v1/models lists stories once',
  );

  const show = (await (await front.fetch('/api/show', { method: 'POST', headers: json, body: JSON.stringify({ model: 'stories' }) })).json()) as Record<
    string,
    unknown
  >;
  t.notOk(show['remote_host'], '/api/show: the local model');
  t.equal((show['details'] as { format?: string })?.format, 'gguf');

  await storiesIsLocal(t);

  const remote = await ollamaChat('gpu-stories');
  t.equal(remote.status, 200, JSON.stringify(remote.body));
  t.equal(remote.body.message?.content, 'from gpu', 'the chosen name reaches the upstream');
  t.equal(fake.chats().at(-1)?.body['model'], 'stories', 'as its own model name');
});

t.test('a discovery refresh that finds the name again warns again; the local model still answers', async (t) => {
  const shown = shadowWarnings('gpu').length;
  t.equal(shown, 0, 'no warning for the discovering upstream before it lists stories');
  fake.models = ['big', 'stories'];
  const warned = await waitFor('the refresh to warn of the collision', () => {
    const w = shadowWarnings('gpu');
    return w.length > 0 && w;
  });
  t.match(warned[0], { model: 'stories:latest', upstream: 'gpu', remote_model: 'stories' });
  await waitFor('a second refresh to warn again', () => shadowWarnings('gpu').length >= 2);

  const stories = (await tags()).filter((m) => m.name === 'stories:latest');
  t.equal(stories.length, 1, '/api/tags still shows stories once');
  t.notOk(stories[0]?.remote_host, 'as the local model');
  await storiesIsLocal(t);

  const deleted = await front.fetch('/api/delete', { method: 'DELETE', headers: json, body: JSON.stringify({ model: 'stories' }) });
  t.equal(deleted.status, 200, 'delete acts on the local model, not refused as remote');
  const after = (await tags()).find((m) => m.name === 'stories:latest');
  t.match(after, { remote_model: 'stories', details: { format: 'upstream' } }, 'with the local model gone, the remote one has the name');
});
