/**
 * What Claude Code sends first, through `/v1/messages` and `/v1/messages/count_tokens`, with the
 * official `@anthropic-ai/sdk` client against a real appliance on the fake backend
 * (`lia/testing`): the request of fixtures/claude-code.ts (a `system` turn in the middle of the
 * conversation, 24 untyped custom tools, adaptive thinking, `context_management`, `output_config`,
 * the `anthropic-beta` flags) is answered, streamed and not; a tool call comes back as a
 * `tool_use` and its `tool_result` goes back in; server tools are left out, and forcing one is a
 * 400; wrong types are 400s in Anthropic's format naming the field as the client sent it.
 */
import Anthropic from '@anthropic-ai/sdk';
import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from 'lia/testing';
import { createScriptedModel } from '../../core/testing/index.js';
import { CLAUDE_CODE_BETAS, claudeCodeFirstRequest } from './fixtures/claude-code.js';

const app = await startTestAppliance({
  plugins: {
    'fake-backend': FAKE_BACKEND,
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'host-network': false,
    'host-gpu': false,
    'host-services': false,
    webui: false,
  },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');
await createScriptedModel(app, 'agent', { toolCalls: [{ name: 'Bash', arguments: { command: 'ls' } }], answer: 'the files are {{result}}' });

const trusted = ((input: string, init: Record<string, unknown> = {}) =>
  undiciFetch(input, { ...init, dispatcher: app.dispatcher() })) as unknown as typeof fetch;
// A timeout of its own: the SDK refuses a non-streamed request with Claude Code's max_tokens otherwise.
const client = new Anthropic({ baseURL: app.url, apiKey: app.key, fetch: trusted, maxRetries: 0, timeout: 120_000 });

/** The error a promise rejects with (fails the test when it resolves). */
async function refusal(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(err instanceof Anthropic.APIError)) throw new Error(`expected an APIError, got ${String(err)}`);
  return err;
}

/** Text of a message's text blocks. */
const textOf = (m: { content: { type: string; text?: string }[] }): string => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('');

t.test("Claude Code's first request is answered, streamed and not, and counted", async (t) => {
  const body = { ...claudeCodeFirstRequest('parrot', 'Say hello'), betas: CLAUDE_CODE_BETAS };
  const streamed = await client.beta.messages.stream(body as never).finalMessage();
  t.equal(textOf(streamed), 'parrot says: Say hello', 'the answer to the last user turn');
  t.equal(streamed.stop_reason, 'end_turn');
  const whole = await client.beta.messages.create({ ...body, stream: false } as never);
  t.match(whole, { type: 'message', role: 'assistant', model: 'parrot:latest', stop_reason: 'end_turn' });
  t.equal(textOf(whole as never), 'parrot says: Say hello');
  const { model, messages, system, tools, thinking, context_management, output_config } = body as Record<string, unknown>;
  const counted = await client.beta.messages.countTokens({
    model,
    messages,
    system,
    tools,
    thinking,
    context_management,
    output_config,
    betas: CLAUDE_CODE_BETAS,
  } as never);
  t.ok(counted.input_tokens > 0, `count_tokens takes the same body (${counted.input_tokens} tokens)`);
});

t.test('a tool call comes back as tool_use and its result goes back in; server tools are left out', async (t) => {
  const first = claudeCodeFirstRequest('agent', 'List the files');
  const tools = [
    ...(first['tools'] as unknown[]),
    { type: 'web_search_20250305', name: 'web_search', max_uses: 5 },
    { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
  ];
  const body = { ...first, tools, stream: false, betas: CLAUDE_CODE_BETAS };
  const res = await client.beta.messages.create(body as never);
  t.equal(res.stop_reason, 'tool_use');
  const use = res.content.find((b) => b.type === 'tool_use');
  t.match(use, { type: 'tool_use', id: /^toolu_/, name: 'Bash', input: { command: 'ls' } });
  if (!use || use.type !== 'tool_use') return;
  const next = await client.beta.messages.create({
    ...body,
    messages: [
      ...(first['messages'] as unknown[]),
      { role: 'assistant', content: res.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'a.txt b.txt', cache_control: { type: 'ephemeral' } }] },
    ],
  } as never);
  t.equal(textOf(next as never), 'the files are a.txt b.txt', 'the result reached the model');
});

t.test('forcing a server tool, and wrong types, are 400s naming the field as the client sent it', async (t) => {
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 80; i++) deep = { type: 'object', properties: { a: deep } };
  const base: Record<string, unknown> = { ...claudeCodeFirstRequest('parrot', 'x'), stream: false };
  const tools = base['tools'] as unknown[];
  const cases: { name: string; body: Record<string, unknown>; message: RegExp }[] = [
    {
      name: 'forced web_search',
      body: { ...base, tools: [...tools, { type: 'web_search_20250305', name: 'web_search' }], tool_choice: { type: 'tool', name: 'web_search' } },
      message: /^tool_choice\.name: .*cannot run/,
    },
    {
      name: 'a deep input_schema',
      body: { ...base, tools: [tools[0], { name: 'deep', input_schema: deep }] },
      message: /^tools\[1\]\.input_schema is nested too deeply/,
    },
    {
      name: 'a deep output_config.format schema',
      body: { ...base, output_config: { format: { type: 'json_schema', schema: deep } } },
      message: /^output_config\.format\.schema is nested too deeply/,
    },
    { name: 'max_tokens a string', body: { ...base, max_tokens: '100' }, message: /max_tokens/ },
    { name: 'a role that is no role', body: { ...base, messages: [{ role: 'narrator', content: 'x' }] }, message: /messages\[0\]\.role/ },
    { name: 'thinking not an object', body: { ...base, thinking: 'adaptive' }, message: /thinking/ },
    { name: 'budget_tokens a string', body: { ...base, thinking: { type: 'enabled', budget_tokens: 'lots' } }, message: /thinking\.budget_tokens/ },
  ];
  for (const c of cases) {
    const err = await refusal(client.messages.create(c.body as never));
    t.equal(err.status, 400, `${c.name}: 400`);
    t.match(err.error, { type: 'error', error: { type: 'invalid_request_error', message: c.message } }, `${c.name}: Anthropic's error naming the field`);
  }
});
