/**
 * Stopping `lia serve` the way systemd and an operator do: the real SIGTERM (and SIGINT) to a real
 * process with a GGUF model loaded (so node-llama-cpp, and with it a library that re-raises
 * signals, is in the process) and streams open on the three surfaces: /api/generate (NDJSON),
 * /v1/chat/completions (SSE) and /v1/messages (Anthropic's SSE). Each stream either completes or
 * ends with its surface's error frame, never a cut; a new request is refused; usage is written;
 * the log says draining, services stopping, stopped; the exit code is 0.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { Agent, fetch, Headers, type RequestInit } from 'undici';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';

const LIA = path.join(ROOT, 'bin', 'lia.js');
/** Short, so that the test sees streams outlive it and end with an error frame. */
const GRACE_MS = 3000;

const CONFIG = `logLevel: info
shutdownGraceMs: ${GRACE_MS}
plugins:
  host-network: false
  host-gpu: false
  host-services: false
  backend-transformers: false
  webui: false
  metrics: false
  console: false
  engine: { options: { numParallel: 4 } }
  auth-api-key: { options: { usageSaveDelayMs: 3600000 } }
`;

/**
 * The environment without tap's process-info hook (`NODE_OPTIONS=--import …processinfo`), which
 * listens to SIGTERM/SIGINT in every child: with it, a child keeps a signal listener of its own and
 * a library that re-raises the signal once no other listener is left would never do so here, as it
 * does in production. The hook also puts `NODE_OPTIONS` back into the environment of every process
 * a test spawns, so `lia serve` is started through `env -u NODE_OPTIONS`, which drops it after the
 * hook has run and before node starts.
 */
function operatorEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_OPTIONS' && !k.startsWith('_TAPJS_')));
}

interface Served {
  child: ChildProcess;
  dataDir: string;
  out(): string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  fetch(p: string, init?: RequestInit): ReturnType<typeof fetch>;
  agent: Agent;
}

async function serve(t: Test): Promise<Served> {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-shutdown-'));
  t.teardown(() => rm(cwd, { recursive: true, force: true }));
  const dataDir = path.join(cwd, 'data');
  await writeFile(path.join(cwd, 'lia.config.yaml'), CONFIG);
  const child = spawn('/usr/bin/env', ['-u', 'NODE_OPTIONS', process.execPath, LIA, 'serve', '--host', '127.0.0.1', '--port', '0'], {
    cwd,
    env: { ...operatorEnv(), LIA_DATA_DIR: dataDir, LIA_LOG_FORMAT: 'json' },
  });
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  await until(
    () => out.includes('Master key'),
    60_000,
    () => `lia serve did not start: ${out}`,
  );
  const port = /https:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1];
  const ca = await readFile(path.join(dataDir, 'pki', 'root.crt'), 'utf8');
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const agent = new Agent({ connect: { ca } });
  t.teardown(() => agent.destroy());
  return {
    child,
    dataDir,
    out: () => out,
    exit,
    agent,
    fetch: (p, init = {}) => {
      const headers = new Headers(init.headers);
      headers.set('authorization', `Bearer ${key}`);
      headers.set('content-type', 'application/json');
      return fetch(`https://127.0.0.1:${port}${p}`, { ...init, headers, dispatcher: agent });
    },
  };
}

/** An open stream: its body so far, and a promise of the whole body (or the transport error). */
interface OpenStream {
  name: string;
  text(): string;
  done: Promise<{ body: string; error: Error | null }>;
}

/** Starts a long streaming request and resolves once its first bytes have arrived. */
async function openStream(lia: Served, name: string, p: string, body: unknown): Promise<OpenStream> {
  const res = await lia.fetch(p, { method: 'POST', body: JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`${name}: ${res.status} ${await res.text()}`);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = '';
  let first!: () => void;
  const gotFirst = new Promise<void>((r) => (first = r));
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return { body: text, error: null };
        text += decoder.decode(value, { stream: true });
        first();
      }
    } catch (err) {
      return { body: text, error: err as Error };
    } finally {
      first();
    }
  })();
  await gotFirst;
  return { name, text: () => text, done };
}

function jsonLines(out: string): { level: number; msg?: string; [k: string]: unknown }[] {
  return out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg?: string });
}

const LONG = { num_predict: 1_000_000, num_ctx: 100_000, temperature: 1, seed: 1 };

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} drains: streams on /api, /v1 and /v1/messages complete or end with their error frame; usage written; exit 0`, async (t) => {
    const lia = await serve(t);
    await createModel(lia, 'tiny', 'gguf/stories260K-chatml.gguf');
    // Loads the model (node-llama-cpp is imported into the appliance process by the store's first read).
    const warm = await lia.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'tiny', prompt: 'Hi', options: { num_predict: 2 } }) });
    t.equal(warm.status, 200, 'the model answers');
    await warm.text();

    const streams = [
      await openStream(lia, '/api/generate', '/api/generate', { model: 'tiny', prompt: 'Once upon a time', options: LONG }),
      await openStream(lia, '/v1/chat/completions', '/v1/chat/completions', {
        model: 'tiny',
        stream: true,
        max_tokens: LONG.num_predict,
        messages: [{ role: 'user', content: 'Tell me a story' }],
      }),
      await openStream(lia, '/v1/messages', '/v1/messages', {
        model: 'tiny',
        stream: true,
        max_tokens: LONG.num_predict,
        messages: [{ role: 'user', content: 'Tell me a story' }],
      }),
    ];

    lia.child.kill(signal);
    await until(
      () => /draining/.test(lia.out()) || lia.child.exitCode !== null || lia.child.signalCode !== null,
      30_000,
      () => `no drain line: ${lia.out().slice(-3000)}`,
    );
    // A request on a fresh connection is not served: the listening socket is closed (or it gets 503).
    const fresh = new Agent({ connect: { ca: await readFile(path.join(lia.dataDir, 'pki', 'root.crt'), 'utf8') } });
    const late = await lia.fetch('/api/tags', { dispatcher: fresh }).then(
      (r) => r.status,
      () => 'refused',
    );
    await fresh.destroy();
    t.ok(late === 'refused' || late === 503, `a new request during the drain is refused (${late})`);

    const [api, openai, anthropic] = await Promise.all(streams.map((s) => s.done));
    const { code, signal: killedBy } = await lia.exit;
    const log = lia.out();
    t.equal(killedBy, null, `not killed by a signal: ${log.slice(-2000)}`);
    t.equal(code, 0, 'exit code 0');

    // /api: NDJSON, the last line is done: true or {"error": …}.
    t.equal(api!.error, null, `the /api stream was not cut (${api!.error?.message})`);
    const apiLast = JSON.parse(api!.body.trimEnd().split('\n').at(-1)!) as { done?: boolean; error?: string };
    t.ok(apiLast.done === true || /shutting down/.test(apiLast.error ?? ''), `/api ends with done or the error line: ${JSON.stringify(apiLast)}`);

    // /v1: SSE, [DONE] or an OpenAI error frame.
    t.equal(openai!.error, null, `the /v1 stream was not cut (${openai!.error?.message})`);
    const openaiFrames = openai!.body.trimEnd().split('\n\n');
    const openaiLast = openaiFrames.at(-1)!;
    t.ok(
      openaiLast === 'data: [DONE]' || /^data: \{"error":\{"message":"[^"]*shutting down[^"]*","type":"[^"]+"/.test(openaiLast),
      `/v1/chat/completions ends with [DONE] or its error frame: ${openaiLast.slice(0, 300)}`,
    );

    // /v1/messages: message_stop or `event: error`.
    t.equal(anthropic!.error, null, `the /v1/messages stream was not cut (${anthropic!.error?.message})`);
    const anthropicLast = anthropic!.body.trimEnd().split('\n\n').at(-1)!;
    t.ok(
      /^event: message_stop\n/.test(anthropicLast) ||
        /^event: error\ndata: \{"type":"error","error":\{"type":"[a-z_]+","message":"[^"]*shutting down/.test(anthropicLast),
      `/v1/messages ends with message_stop or event: error: ${anthropicLast.slice(0, 300)}`,
    );
    const ended = [apiLast.error !== undefined, !openaiLast.includes('[DONE]'), anthropicLast.startsWith('event: error')].filter(Boolean).length;
    t.comment(`${ended} of 3 streams outlived the ${GRACE_MS / 1000} s grace period and ended with an error frame`);

    const lines = jsonLines(log);
    const msgs = lines.map((l) => l.msg ?? '');
    t.ok(
      msgs.some((m) => m.startsWith(`${signal} received`)),
      'the log names the signal',
    );
    t.ok(
      msgs.some((m) => /^draining/.test(m)),
      'says it drains',
    );
    t.ok(
      msgs.some((m) => /services stopping/.test(m)),
      'says the services are stopping',
    );
    t.ok(
      msgs.some((m) => /stopped$/.test(m)),
      'and that it stopped',
    );
    t.same(
      lines.filter((l) => l.level >= 60),
      [],
      'no fatal line',
    );

    const usage = JSON.parse(await readFile(path.join(lia.dataDir, 'usage.json'), 'utf8')) as { keys: { master: { requests: number } } };
    t.ok(usage.keys.master.requests >= 4, `usage.json was written at shutdown (${usage.keys.master.requests} requests of the master key)`);
  });
}

async function until(ok: () => boolean, ms: number, message: () => string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(message());
    await new Promise((r) => setTimeout(r, 100));
  }
}
