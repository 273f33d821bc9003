/**
 * Codex CLI (`@openai/codex`, pinned in devDependencies) against the appliance over
 * `/v1/responses`: a model provider given with `-c` flags, the named key through `env_key`, the
 * CA through `CODEX_CA_CERTIFICATE`. (b) The scripted fake model calls `exec_command`; Codex runs
 * the command in the workspace and sends its output back as `function_call_output`; the scripted
 * answer, carrying that output, is what `codex exec` prints. (a) The real GGUF takes Codex's
 * whole prompt (well over 10,000 tokens) and the session completes.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { clientBin, describeRun, longContextModel, metric, runClient, scriptedModel, startAgentAppliance, type AgentAppliance } from './agent-appliance.js';

const MARKER = 'codex-marker-7f3a';

function codexArgs(a: AgentAppliance, model: string, prompt: string): (ws: string) => string[] {
  return () => [
    '-c',
    'model_provider="lia"',
    '-c',
    `model_providers.lia={ name = "LIA", base_url = "${a.app.url}/v1", env_key = "LIA_API_KEY", wire_api = "responses" }`,
    '-c',
    `model="${model}"`,
    '-c',
    'model_context_window=40960',
    'exec',
    '--skip-git-repo-check',
    '--dangerously-bypass-approvals-and-sandbox',
    prompt,
  ];
}

const codexEnv = (a: AgentAppliance): Record<string, string> => ({ LIA_API_KEY: a.key, CODEX_CA_CERTIFICATE: a.caFile, SSL_CERT_FILE: a.caFile });

t.test('codex exec runs a tool the scripted model calls and prints the answer built on its output', async (t) => {
  const a = await startAgentAppliance('agent-codex');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', {
    toolCalls: [{ name: 'exec_command', arguments: { cmd: 'cat note.txt && echo ran > ran.txt' } }],
    answer: 'scripted answer: {{result}}',
  });
  const run = await runClient(a, await clientBin('codex'), codexArgs(a, 'scripted', 'Show me note.txt'), codexEnv(a), { files: { 'note.txt': `${MARKER}\n` } });
  t.equal(run.code, 0, describeRun(run));
  t.match(run.stdout, /scripted answer:/, 'the scripted answer is printed');
  t.match(run.stdout, MARKER, 'it carries the command’s output, sent back as function_call_output');
  t.equal((await readFile(path.join(run.workspace, 'ran.txt'), 'utf8')).trim(), 'ran', 'the command ran in the workspace');
  t.ok((await metric(a, 'lia_http_requests_total', { route: '/v1/responses', status: '200' })) >= 2, 'two turns or more over /v1/responses');
});

t.test('codex exec completes a session on the real model with its long prompt', async (t) => {
  const a = await startAgentAppliance('agent-codex');
  t.teardown(a.close);
  await longContextModel(a, 'qwen3-tiny');
  const run = await runClient(a, await clientBin('codex'), codexArgs(a, 'qwen3-tiny', 'Say hello.'), codexEnv(a));
  t.equal(run.code, 0, describeRun(run));
  t.ok((await metric(a, 'lia_key_requests_total', { key: 'agent-codex' })) >= 1, 'the appliance served the named key');
  const prompt = await metric(a, 'lia_key_prompt_tokens_total', { key: 'agent-codex' });
  t.ok(prompt > 5000, `a real agent prompt went through the engine (${prompt} prompt tokens)`);
});
