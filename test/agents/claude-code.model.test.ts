/**
 * Claude Code (`@anthropic-ai/claude-code`, pinned with its linux-x64 binary in devDependencies)
 * against the appliance over `/v1/messages`: `ANTHROPIC_BASE_URL`, the named key as
 * `ANTHROPIC_AUTH_TOKEN`, every model tier set to the test's model, the CA through
 * `NODE_EXTRA_CA_CERTS` (its Bun runtime reads it). (b) The scripted fake model asks for `Read`;
 * Claude Code reads the workspace's file and sends it back as a `tool_result`; `claude -p` prints
 * the scripted answer carrying it. (a) The real GGUF takes Claude Code's whole prompt.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import { clientBin, describeRun, longContextModel, metric, runClient, scriptedModel, startAgentAppliance, type AgentAppliance } from './agent-appliance.js';

const MARKER = 'claude-marker-51c2';

const claudeEnv = (a: AgentAppliance, model: string): Record<string, string> => ({
  ANTHROPIC_BASE_URL: a.app.url,
  ANTHROPIC_AUTH_TOKEN: a.key,
  ANTHROPIC_MODEL: model,
  ANTHROPIC_DEFAULT_OPUS_MODEL: model,
  ANTHROPIC_DEFAULT_SONNET_MODEL: model,
  ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
  ANTHROPIC_SMALL_FAST_MODEL: model,
  NODE_EXTRA_CA_CERTS: a.caFile,
});

t.test('claude -p reads a file the scripted model asks for and prints the answer built on it', async (t) => {
  const a = await startAgentAppliance('agent-claude');
  t.teardown(a.close);
  const note = path.join(a.dir, 'note.txt');
  await writeFile(note, `${MARKER}\n`);
  await scriptedModel(a, 'scripted', { toolCalls: [{ name: 'Read', arguments: { file_path: note } }], answer: 'scripted answer: {{result}}' });
  const run = await runClient(a, await clientBin('claude'), () => ['-p', `Read ${note}`, '--allowedTools', 'Read'], claudeEnv(a, 'scripted'));
  t.equal(run.code, 0, describeRun(run));
  t.match(run.stdout, /scripted answer:/, 'the scripted answer is printed');
  t.match(run.stdout, MARKER, 'it carries the file, sent back as a tool_result');
  t.ok((await metric(a, 'lia_http_requests_total', { route: '/v1/messages', status: '200' })) >= 2, 'two turns or more over /v1/messages');
});

t.test('claude -p completes a session on the real model with its long prompt', async (t) => {
  const a = await startAgentAppliance('agent-claude');
  t.teardown(a.close);
  await longContextModel(a, 'qwen3-tiny');
  const run = await runClient(a, await clientBin('claude'), () => ['-p', 'Say hello.'], claudeEnv(a, 'qwen3-tiny'));
  t.equal(run.code, 0, describeRun(run));
  const prompt = await metric(a, 'lia_key_prompt_tokens_total', { key: 'agent-claude' });
  t.ok(prompt > 5000, `a real agent prompt went through the engine (${prompt} prompt tokens)`);
});
