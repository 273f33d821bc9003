/**
 * What `lia serve` writes to its log, as an operator reads it: the start line names the HTTPS
 * address (Fastify's own would say http://), JSON lines when asked for (`LIA_LOG_FORMAT=json`),
 * readable lines with `pretty`, a client that walks away from a stream is an info line, not
 * an error with a stack, and no API key ever reaches it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Agent, fetch, Headers, type RequestInit } from 'undici';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';
import { ENGINE_ONLY, RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const LIA = path.join(ROOT, 'bin', 'lia.js');

interface Served {
  child: ChildProcess;
  dataDir: string;
  /** Everything written to stdout so far. */
  out(): string;
}

/** Starts `lia serve` on a free port with the given plugins off; resolves once the banner is out. */
async function serve(t: Test, off: Record<string, unknown>, format: string, level = 'info'): Promise<Served> {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-logs-'));
  t.teardown(() => rm(cwd, { recursive: true, force: true }));
  const dataDir = path.join(cwd, 'data');
  const plugins = Object.keys(off)
    .map((k) => `  ${k}: false`)
    .join('\n');
  await writeFile(path.join(cwd, 'lia.config.yaml'), `logLevel: ${level}\nplugins:\n${plugins}\n`);
  const child = spawn(process.execPath, [LIA, 'serve', '--host', '127.0.0.1', '--port', '0'], {
    cwd,
    env: { ...process.env, LIA_DATA_DIR: dataDir, LIA_LOG_FORMAT: format },
  });
  t.teardown(() => stop(child));
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  await until(
    () => out.includes('Master key'),
    60_000,
    () => `lia serve did not start: ${out}`,
  );
  return { child, dataDir, out: () => out };
}

/** The JSON log lines among stdout's lines (the banner is plain text). */
function jsonLines(out: string): { level: number; msg?: string; [k: string]: unknown }[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg?: string });
}

t.test('with LIA_LOG_FORMAT=json the start line is JSON and names the HTTPS address', async (t) => {
  const lia = await serve(t, RUNTIME_ONLY, 'json');
  const listening = jsonLines(lia.out()).filter((l) => /^listening at /.test(l.msg ?? ''));
  t.ok(listening.length > 0, 'a start line');
  for (const l of listening) t.match(l.msg, /^listening at https:\/\/127\.0\.0\.1:\d+$/);
  t.notMatch(lia.out(), /http:\/\//, 'no line names plain http');
});

t.test('with LIA_LOG_FORMAT=pretty the lines are readable text', async (t) => {
  const lia = await serve(t, RUNTIME_ONLY, 'pretty');
  const line = lia
    .out()
    .split('\n')
    .find((l) => l.includes('listening at https://127.0.0.1:'));
  t.ok(line, 'the start line');
  t.match(line, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*: listening at https:/, 'time, level, message');
  t.notOk(
    lia
      .out()
      .split('\n')
      .some((l) => l.startsWith('{"level"')),
    'no JSON lines',
  );
});

t.test('a client that leaves an NDJSON stream is an info line, not an error', async (t) => {
  const lia = await serve(t, ENGINE_ONLY, 'json');
  const port = /https:\/\/127\.0\.0\.1:(\d+)/.exec(lia.out())?.[1];
  const ca = await readFile(path.join(lia.dataDir, 'pki', 'root.crt'), 'utf8');
  const key = (await readFile(path.join(lia.dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const agent = new Agent({ connect: { ca } });
  t.teardown(() => agent.close());
  const client = {
    fetch: (p: string, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set('authorization', `Bearer ${key}`);
      return fetch(`https://127.0.0.1:${port}${p}`, { ...init, headers, dispatcher: agent });
    },
  };
  await createModel(client, 'tiny', 'gguf/stories260K-chatml.gguf');

  const abort = new AbortController();
  const res = await client.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'tiny', prompt: 'Once upon a time', options: { num_predict: 100000, num_ctx: 100000 } }),
    signal: abort.signal,
  });
  t.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await reader.read();
  abort.abort();
  await reader.read().catch(() => undefined);

  const gone = () => jsonLines(lia.out()).some((l) => /client (went away|disconnected)/.test(l.msg ?? ''));
  await until(gone, 20_000, () => `no line says the client went away: ${lia.out().slice(-3000)}`);
  const errors = jsonLines(lia.out()).filter((l) => l.level >= 50);
  t.same(errors, [], 'no error-level line');
  const line = jsonLines(lia.out()).find((l) => /client went away/.test(l.msg ?? ''));
  t.equal(line?.level, 30, 'an info line');
  t.notOk(line && 'err' in line, 'without an error and its stack');
});

t.test('no key reaches the log, even at debug level: master, named, rotated or wrong', async (t) => {
  const lia = await serve(t, RUNTIME_ONLY, 'json', 'debug');
  const port = /https:\/\/127\.0\.0\.1:(\d+)/.exec(lia.out())?.[1];
  const ca = await readFile(path.join(lia.dataDir, 'pki', 'root.crt'), 'utf8');
  const master = (await readFile(path.join(lia.dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const agent = new Agent({ connect: { ca } });
  t.teardown(() => agent.close());
  const call = (p: string, key: string, init: RequestInit = {}) =>
    fetch(`https://127.0.0.1:${port}${p}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
      dispatcher: agent,
    });

  const created = await call('/system/api-keys', master, { method: 'POST', body: JSON.stringify({ name: 'scraper', scopes: ['system:read'] }) });
  t.equal(created.status, 201);
  const named = ((await created.json()) as { key: string }).key;
  t.equal((await call('/metrics', named)).status, 200, 'the named key is used');
  const wrong = `${named.slice(0, -4)}zzzz`;
  t.equal((await call('/metrics', wrong)).status, 401, 'a near miss is refused');
  const rotated = await call('/system/api-keys/rotate', master, { method: 'POST' });
  t.equal(rotated.status, 200);
  const fresh = ((await rotated.json()) as { key: string }).key;
  t.equal((await call('/metrics', fresh)).status, 200, 'the new master key is used');
  await until(
    () => jsonLines(lia.out()).filter((l) => l.msg === 'request completed').length >= 5,
    10_000,
    () => `the requests were not logged: ${lia.out().slice(-2000)}`,
  );

  const log = lia.out();
  for (const [what, secret] of [
    ['master', master],
    ['named', named],
    ['rotated', fresh],
    ['wrong', wrong],
  ] as const) {
    t.notOk(log.includes(secret), `the ${what} key is not in the log`);
    t.notOk(log.includes(secret.slice(4, 20)), `nor a 16-character piece of it`);
  }
});

async function until(ok: () => boolean, ms: number, message: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(message());
    await new Promise((r) => setTimeout(r, 100));
  }
}

function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });
}
