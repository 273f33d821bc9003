/**
 * Qwen Code (`@qwen-code/qwen-code`, pinned in devDependencies) against the appliance over
 * `/v1/chat/completions`: `--auth-type openai` with `OPENAI_BASE_URL`, the named key as
 * `OPENAI_API_KEY`, `OPENAI_MODEL`, the CA through `NODE_EXTRA_CA_CERTS`. (b) The scripted fake
 * model asks for `read_file`; Qwen Code reads the file and sends it back as a `tool` message;
 * `qwen -p` prints the scripted answer carrying it. (a) The real GGUF takes its whole prompt.
 */
import { writeFile } from 'node:fs/promises';
import t from 'tap';
import { clientBin, describeRun, longContextModel, metric, runClient, scriptedModel, startAgentAppliance, type AgentAppliance } from './agent-appliance.js';

const MARKER = 'qwen-marker-2b8e';

const qwenEnv = (a: AgentAppliance, model: string): Record<string, string> => ({
  OPENAI_BASE_URL: `${a.app.url}/v1`,
  OPENAI_API_KEY: a.key,
  OPENAI_MODEL: model,
  NODE_EXTRA_CA_CERTS: a.caFile,
});

t.test('qwen -p reads a file the scripted model asks for and prints the answer built on it', async (t) => {
  const a = await startAgentAppliance('agent-qwen');
  t.teardown(a.close);
  await scriptedModel(a, 'scripted', {
    toolCalls: [{ name: 'read_file', arguments: { file_path: `${a.dir}/note.txt` } }],
    answer: 'scripted answer: {{result}}',
  });
  await writeFile(`${a.dir}/note.txt`, `${MARKER}\n`);
  const run = await runClient(
    a,
    await clientBin('qwen'),
    () => ['--auth-type', 'openai', '--approval-mode', 'yolo', '-p', `Read ${a.dir}/note.txt`],
    qwenEnv(a, 'scripted'),
  );
  t.equal(run.code, 0, describeRun(run));
  t.match(run.stdout, /scripted answer:/, 'the scripted answer is printed');
  t.match(run.stdout, MARKER, 'it carries the file, sent back as a tool message');
  t.ok((await metric(a, 'lia_http_requests_total', { route: '/v1/chat/completions', status: '200' })) >= 2, 'two turns or more over /v1/chat/completions');
});

t.test('qwen -p completes a session on the real model with its long prompt', async (t) => {
  const a = await startAgentAppliance('agent-qwen');
  t.teardown(a.close);
  // Vowels only: random text meets one within a few tokens, but an answer whose first token
  // starts with a space or a newline (the most common tokens) would end empty, which Qwen Code
  // retries and then fails on.
  await longContextModel(a, 'qwen3-tiny', { stop: ['e', 'a', 'o'] });
  const run = await runClient(a, await clientBin('qwen'), () => ['--auth-type', 'openai', '-p', 'Say hello.'], qwenEnv(a, 'qwen3-tiny'));
  t.equal(run.code, 0, describeRun(run));
  const prompt = await metric(a, 'lia_key_prompt_tokens_total', { key: 'agent-qwen' });
  t.ok(prompt > 5000, `a real agent prompt went through the engine (${prompt} prompt tokens)`);
});
