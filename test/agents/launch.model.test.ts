/**
 * `lia launch` as a user runs it, the `lia` process spawned against a running appliance: `--print`
 * for each client (a named `launch-<client>` key with the `inference` scope, never the master
 * key; the model's context raised to 32768), a fake `claude` on PATH that prints what it was given
 * (the settings, the CA file, the user's arguments after `--`; the kept key reused on the second
 * launch, in a 0600 file), a missing client (how to install it, no stack trace), and one real
 * launch of Codex CLI against the scripted fake model.
 */
import { spawn } from 'node:child_process';
import { chmod, mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';
import { clientBin, scriptedModel, startAgentAppliance, type AgentAppliance } from './agent-appliance.js';

interface Lia {
  code: number | null;
  stdout: string;
  stderr: string;
}

function lia(a: AgentAppliance, args: string[], env: Record<string, string>): Promise<Lia> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/lia.js'), ...args], {
    cwd: a.dir,
    env: {
      PATH: '/usr/bin:/bin',
      LIA_FROM_SOURCE: '1',
      LIA_URL: a.app.url,
      LIA_CA_CERT: a.caFile,
      LIA_API_KEY: a.app.key,
      LIA_DATA_DIR: path.join(a.dir, 'no-data'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
  return new Promise((resolve) => child.once('close', (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

async function keys(a: AgentAppliance): Promise<Array<{ name: string; scopes: string[] }>> {
  return ((await (await a.app.fetch('/system/api-keys')).json()) as { keys: Array<{ name: string; scopes: string[] }> }).keys;
}

t.test('lia launch --print shows each client’s settings with a key of its own', async (t) => {
  const a = await startAgentAppliance('unused');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', { toolCalls: [], answer: 'hi' });
  const home = path.join(a.dir, 'home');
  const expected: Record<string, RegExp[]> = {
    claude: [
      /export ANTHROPIC_BASE_URL=https:\/\/localhost:\d+\n/,
      /export ANTHROPIC_AUTH_TOKEN=lia_/,
      /unset ANTHROPIC_API_KEY/,
      /export ANTHROPIC_MODEL=scripted:latest|export ANTHROPIC_MODEL=scripted/,
      /export NODE_EXTRA_CA_CERTS=\S*lia-ca\.crt/,
      /export CLAUDE_CODE_AUTO_COMPACT_WINDOW=32768\n/,
      /\nclaude\n$/,
    ],
    codex: [
      /export LIA_API_KEY=lia_/,
      /export CODEX_CA_CERTIFICATE=\S*lia-ca\.crt/,
      /export SSL_CERT_FILE=/,
      /codex -c 'model_provider="lia"'/,
      /base_url = "https:\/\/localhost:\d+\/v1"/,
      /wire_api = "responses"/,
      /model_context_window=32768/,
    ],
    opencode: [/export OPENCODE_CONFIG_CONTENT=.*"@ai-sdk\/openai-compatible"/, /"context":32768/, /export NODE_EXTRA_CA_CERTS=/, /\nopencode\n$/],
    qwen: [/export OPENAI_BASE_URL=https:\/\/localhost:\d+\/v1/, /export OPENAI_API_KEY=lia_/, /export NODE_EXTRA_CA_CERTS=/, /qwen --auth-type openai/],
  };
  for (const [client, patterns] of Object.entries(expected)) {
    const r = await lia(a, ['launch', client, '--print'], { HOME: home });
    t.equal(r.code, 0, `${client}: ${r.stderr}`);
    t.match(r.stdout, new RegExp(`^# .* key "launch-${client}" \\(created\\)`), `${client}: a new key`);
    for (const p of patterns) t.match(r.stdout, p, `${client}: ${p}`);
    t.notMatch(r.stdout, a.app.key, `${client}: never the master key`);
  }
  const named = await keys(a);
  for (const client of Object.keys(expected))
    t.same(named.find((k) => k.name === `launch-${client}`)?.scopes, ['inference'], `launch-${client} has the inference scope alone`);
  const shown = (await (
    await a.app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'scripted' }), headers: { 'content-type': 'application/json' } })
  ).json()) as { parameters?: string };
  t.match(shown.parameters, /num_ctx\s+32768/, 'the model is served with an agent’s context');
});

t.test('lia launch runs the client with the settings and the user’s arguments, and reuses its key', async (t) => {
  const a = await startAgentAppliance('unused');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', { toolCalls: [], answer: 'hi' });
  const bin = path.join(a.dir, 'bin');
  await mkdir(bin);
  await writeFile(path.join(bin, 'claude'), '#!/bin/sh\necho "ARGS $*"\nenv | grep -E "^(ANTHROPIC|NODE_EXTRA)" | sort\nexit 3\n');
  await chmod(path.join(bin, 'claude'), 0o755);
  const env = { HOME: path.join(a.dir, 'home'), PATH: `${bin}:/usr/bin:/bin`, ANTHROPIC_API_KEY: 'sk-ant-elsewhere' };
  const first = await lia(a, ['launch', 'claude', '--model', 'scripted', '--', '-p', 'hello there'], env);
  t.equal(first.code, 3, 'the client’s exit code');
  t.match(first.stdout, /^ARGS -p hello there$/m, 'the arguments after --');
  t.match(first.stdout, new RegExp(`^ANTHROPIC_BASE_URL=${a.app.url}$`, 'm'));
  t.match(first.stdout, /^ANTHROPIC_AUTH_TOKEN=lia_\S+$/m);
  t.match(first.stdout, /^ANTHROPIC_MODEL=scripted$/m);
  t.match(first.stdout, /^NODE_EXTRA_CA_CERTS=\/\S+$/m);
  t.notMatch(first.stdout, /sk-ant-elsewhere/, 'an inherited Anthropic key is not passed on');
  t.match(first.stderr, /Starting Claude Code .* key "launch-claude", created/);
  const token = /^ANTHROPIC_AUTH_TOKEN=(\S+)$/m.exec(first.stdout)![1]!;
  const ok = await a.app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'scripted', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.equal(ok.status, 200, 'the key it passed works for inference');

  const second = await lia(a, ['launch', 'claude', '--model', 'scripted'], env);
  t.equal(second.code, 3);
  t.match(second.stderr, /key "launch-claude", reused/);
  t.match(second.stdout, `ANTHROPIC_AUTH_TOKEN=${token}`, 'the same secret: a session already running keeps working');
  const dir = path.join(a.dir, 'home', '.config', 'lia', 'launch');
  const [host] = await readdir(dir);
  t.equal((await stat(path.join(dir, host!, 'claude.key'))).mode & 0o777, 0o600, 'the kept secret is readable by its owner only');
});

t.test('lia launch never hands on a key of its name that holds more than inference', async (t) => {
  const a = await startAgentAppliance('unused');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', { toolCalls: [], answer: 'hi' });
  const made = await a.app.fetch('/system/api-keys', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'launch-claude', scopes: ['system:admin', 'inference'] }),
  });
  t.equal(made.status, 201);
  const { key: held } = (await made.json()) as { key: string };
  const r = await lia(a, ['launch', 'claude', '--model', 'scripted', '--print'], { HOME: path.join(a.dir, 'home') });
  t.not(r.code, 0);
  t.match(r.stderr, /a key named "launch-claude" exists with the scopes \["system:admin","inference"\]; .*revoke it \(lia key revoke launch-claude\)/);
  t.notMatch(r.stdout, /lia_/, 'no key is printed');
  const still = await a.app.fetch('/system/status', { headers: { authorization: `Bearer ${held}` } });
  t.equal(still.status, 200, 'the existing key was not rotated');
  await still.arrayBuffer();
});

t.test('lia launch says how to install a missing client', async (t) => {
  const a = await startAgentAppliance('unused');
  t.teardown(a.close);
  const expected = { claude: '@anthropic-ai/claude-code', codex: '@openai/codex', opencode: 'opencode-ai', qwen: '@qwen-code/qwen-code' };
  for (const [client, pkg] of Object.entries(expected)) {
    const r = await lia(a, ['launch', client], { HOME: path.join(a.dir, 'home') });
    t.not(r.code, 0, `${client}: nonzero exit`);
    t.match(r.stderr, `npm install -g ${pkg}`, `${client}: how to install it`);
    t.notMatch(r.stderr, /\n\s+at /, `${client}: no stack trace`);
  }
  const unknown = await lia(a, ['launch', 'emacs'], { HOME: path.join(a.dir, 'home') });
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown client "emacs"; one of: claude, codex, opencode, qwen/);
});

t.test('lia launch codex runs Codex CLI through the tool loop of the scripted model', async (t) => {
  const a = await startAgentAppliance('unused');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', {
    toolCalls: [{ name: 'exec_command', arguments: { cmd: 'echo launched-marker-4e1' } }],
    answer: 'scripted answer: {{result}}',
  });
  const codex = await clientBin('codex');
  const ws = path.join(a.dir, 'ws');
  await mkdir(ws);
  const r = await lia(
    a,
    [
      'launch',
      'codex',
      '--model',
      'scripted',
      '--',
      'exec',
      '--skip-git-repo-check',
      '--dangerously-bypass-approvals-and-sandbox',
      '-C',
      ws,
      'Echo the marker',
    ],
    {
      HOME: path.join(a.dir, 'home'),
      PATH: `${path.dirname(codex)}:/usr/bin:/bin`,
    },
  );
  t.equal(r.code, 0, r.stderr.slice(-2000));
  t.match(r.stdout, /scripted answer:.*launched-marker-4e1/s, 'the answer carries the command’s output');
});
