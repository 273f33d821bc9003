/**
 * What the agent tests share: an appliance with a named key (`inference` scope, never the master
 * key) for the client under test, a scripted fake model (`createScriptedModel` from `lia/testing`)
 * and the real long-context GGUF, and a runner that starts an installed client the way a user
 * does: in a temporary HOME and workspace, trusting the appliance's CA through the client's own
 * variable (no TLS bypass), offline (telemetry, updates and other traffic off), with a bounded
 * timeout. The client binaries come from the pinned devDependencies in node_modules/.bin.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createScriptedModel, FAKE_BACKEND, startTestAppliance, type FakeScript, type TestAppliance } from 'lia/testing';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';

/** The real model: Qwen3's tokenizer and chat template, random weights, 40,960 trained context. */
export const LONG_MODEL_FILE = 'gguf/synthetic-qwen3-tiny.gguf';

export interface AgentAppliance {
  app: TestAppliance;
  /** The named key's secret. */
  key: string;
  keyName: string;
  /** The CA certificate as a file, for the client's CA variable. */
  caFile: string;
  /** A scratch folder removed on close. */
  dir: string;
  close(): Promise<void>;
}

/** Starts an appliance (the fake backend beside llama.cpp) and creates the named key `name`. */
export async function startAgentAppliance(name: string): Promise<AgentAppliance> {
  const app = await startTestAppliance({ plugins: { 'backend-transformers': false, 'host-gpu': false, webui: false, 'fake-backend': FAKE_BACKEND } });
  const dir = await mkdtemp(path.join(os.tmpdir(), `lia-agent-${name}-`));
  const caFile = path.join(dir, 'lia-ca.crt');
  await writeFile(caFile, app.ca);
  const res = await app.fetch('/system/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, scopes: ['inference'] }),
  });
  if (res.status !== 201 && res.status !== 200) throw new Error(`creating the key "${name}": HTTP ${res.status} ${await res.text()}`);
  const { key } = (await res.json()) as { key: string };
  return {
    app,
    key,
    keyName: name,
    caFile,
    dir,
    async close() {
      await app.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Stores the scripted fake model `name`. */
export const scriptedModel = (a: AgentAppliance, name: string, script: FakeScript): Promise<void> => createScriptedModel(a.app, name, script);

/**
 * Stores the real GGUF as `name` with a context large enough for an agent's prompt. Its weights
 * are random, so it is given stop sequences that random text meets within a few tokens: the turn
 * then ends as a finished answer (clients such as Codex fail a session cut at its token limit),
 * and a cap of 256 tokens bounds the rest.
 */
export async function longContextModel(a: AgentAppliance, name: string, parameters: Record<string, unknown> = {}): Promise<void> {
  await createModel(a.app, name, LONG_MODEL_FILE, { parameters: { num_ctx: 40960, num_predict: 256, stop: [' ', '\n', 'e', 'a', 'o', '.'], ...parameters } });
}

/** Counters of `/metrics` whose line matches all of `labels`, summed. */
export async function metric(a: AgentAppliance, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await a.app.fetch('/metrics')).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

export interface ClientRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The temporary workspace the client ran in (removed with the appliance's scratch folder). */
  workspace: string;
}

/**
 * Clients whose npm wrapper only becomes the real program through its postinstall, which npm 11
 * does not run for dependencies unless allowed (package.json `allowScripts`): the native binary of
 * the pinned platform package, the file that postinstall would have linked.
 */
const NATIVE_BINS: Readonly<Record<string, string>> = {
  claude: path.join('@anthropic-ai', 'claude-code-linux-x64', 'claude'),
  opencode: path.join('opencode-linux-x64', 'bin', 'opencode'),
};

/** An installed client's executable; a clear failure when the devDependency is missing. */
export async function clientBin(bin: string): Promise<string> {
  const native = NATIVE_BINS[bin];
  const file = native ? path.join(ROOT, 'node_modules', native) : path.join(ROOT, 'node_modules', '.bin', bin);
  await access(file).catch(() => {
    throw new Error(`${file} is missing: install the pinned agent devDependencies (npm install)`);
  });
  return file;
}

/** Variables that keep every client offline and quiet, whatever it is. */
export const OFFLINE_ENV: Readonly<Record<string, string>> = {
  DISABLE_TELEMETRY: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_ERROR_REPORTING: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  OPENCODE_DISABLE_AUTOUPDATE: '1',
  OPENCODE_DISABLE_MODELS_FETCH: '1',
  OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
  OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
  OPENCODE_DISABLE_SHARE: '1',
  QWEN_USAGE_STATISTICS_ENABLED: 'false',
  NO_COLOR: '1',
};

/**
 * Runs `file args` in a fresh workspace (with `files` written into it) and a fresh HOME, with
 * only PATH, the offline variables and `env`; killed after `timeoutMs` (default 240 s).
 */
export async function runClient(
  a: AgentAppliance,
  file: string,
  args: (workspace: string) => string[],
  env: Record<string, string>,
  { files = {}, timeoutMs = 240_000 }: { files?: Record<string, string>; timeoutMs?: number } = {},
): Promise<ClientRun> {
  const workspace = await mkdtemp(path.join(a.dir, 'ws-'));
  const home = await mkdtemp(path.join(a.dir, 'home-'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(workspace, name), text);
  const child = spawn(file, args(workspace), {
    cwd: workspace,
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: home, TMPDIR: os.tmpdir(), ...OFFLINE_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('close', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  return { code, signal, stdout, stderr, workspace };
}

/** The text a test prints when a client run goes wrong: its exit and the tails of its output. */
export const describeRun = (r: ClientRun): string => `exit ${r.code ?? r.signal}\n--- stdout\n${r.stdout.slice(-2000)}\n--- stderr\n${r.stderr.slice(-2000)}`;
