/**
 * opencode (`opencode-ai`, pinned with its linux-x64 binary in devDependencies) against the
 * appliance over `/v1/chat/completions`: its whole configuration in `OPENCODE_CONFIG_CONTENT` (an
 * `@ai-sdk/openai-compatible` provider, bundled in the binary), the named key read from
 * `LIA_API_KEY`, the CA through `NODE_EXTRA_CA_CERTS` (Bun). (b) The scripted fake model asks for
 * `read`; opencode reads the file and sends it back as a `tool` message; `opencode run` prints
 * the scripted answer carrying it. (a) The real GGUF takes opencode's whole prompt.
 */
import t from 'tap';
import { clientBin, describeRun, longContextModel, metric, runClient, scriptedModel, startAgentAppliance, type AgentAppliance } from './agent-appliance.js';

const MARKER = 'opencode-marker-9d04';

const opencodeEnv = (a: AgentAppliance, model: string): Record<string, string> => ({
  LIA_API_KEY: a.key,
  NODE_EXTRA_CA_CERTS: a.caFile,
  OPENCODE_CONFIG_CONTENT: JSON.stringify({
    provider: {
      lia: {
        npm: '@ai-sdk/openai-compatible',
        name: 'LIA',
        options: { baseURL: `${a.app.url}/v1`, apiKey: '{env:LIA_API_KEY}' },
        models: { [model]: { name: model, tool_call: true, limit: { context: 40960, output: 4096 } } },
      },
    },
    model: `lia/${model}`,
    small_model: `lia/${model}`,
    autoupdate: false,
    share: 'disabled',
  }),
});

t.test('opencode run reads a file the scripted model asks for and prints the answer built on it', async (t) => {
  const a = await startAgentAppliance('agent-opencode');
  t.teardown(a.close);
  // A path inside the workspace opencode runs in (a path outside it needs a permission that
  // `opencode run` refuses without asking).
  await scriptedModel(a, 'scripted', { toolCalls: [{ name: 'read', arguments: { filePath: 'note.txt' } }], answer: 'scripted answer: {{result}}' });
  const run = await runClient(a, await clientBin('opencode'), () => ['run', 'Read note.txt'], opencodeEnv(a, 'scripted'), {
    files: { 'note.txt': `${MARKER}\n` },
  });
  t.equal(run.code, 0, describeRun(run));
  t.match(run.stdout, /scripted answer:/, 'the scripted answer is printed');
  t.match(run.stdout, MARKER, 'it carries the file, sent back as a tool message');
  t.ok((await metric(a, 'lia_http_requests_total', { route: '/v1/chat/completions', status: '200' })) >= 2, 'two turns or more over /v1/chat/completions');
});

t.test('opencode run completes a session on the real model with its long prompt', async (t) => {
  const a = await startAgentAppliance('agent-opencode');
  t.teardown(a.close);
  await longContextModel(a, 'qwen3-tiny');
  const run = await runClient(a, await clientBin('opencode'), () => ['run', 'Say hello.'], opencodeEnv(a, 'qwen3-tiny'));
  t.equal(run.code, 0, describeRun(run));
  const prompt = await metric(a, 'lia_key_prompt_tokens_total', { key: 'agent-opencode' });
  t.ok(prompt > 5000, `a real agent prompt went through the engine (${prompt} prompt tokens)`);
});
