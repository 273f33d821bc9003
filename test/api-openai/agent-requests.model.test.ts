/**
 * What coding agents send first, through `/v1/responses` and `/v1/chat/completions`, with the
 * official `openai` client against a real appliance on the fake backend (`lia/testing`): Codex
 * CLI's first request (fixtures/codex.ts: function tools, a `namespace` tool, the hosted
 * `web_search`, `include`, `store: false`, `prompt_cache_key`, `client_metadata`,
 * `reasoning.summary`) is answered, streamed and not; a call of a namespaced function comes back
 * under the name and namespace the client declared, and its result goes back in; forcing a
 * hosted tool and sending wrong types are 400s in OpenAI's format naming the client's field.
 * Every body and stream event the client receives is checked against OpenAI's schemas.
 */
import t from 'tap';
import { APIError } from 'openai';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { createScriptedModel } from '../../core/testing/index.js';
import { openaiFixture } from './openai-client.js';
import { CODEX_NAMESPACE, CODEX_NAMESPACED_FUNCTION, codexFirstRequest } from './fixtures/codex.js';

const fx = await openaiFixture(t, {}, { 'fake-backend': FAKE_BACKEND, 'backend-llama-cpp': false, 'backend-transformers': false });
await createFakeModel(fx.app, 'parrot', 'parrot says:');
await createScriptedModel(fx.app, 'agent', {
  toolCalls: [{ name: `${CODEX_NAMESPACE}${CODEX_NAMESPACED_FUNCTION}`, arguments: { query: 'install' } }],
  answer: 'the docs say {{result}}',
});
const { client } = fx;

/** The error a promise rejects with (fails the test when it resolves). */
async function refusal(p: Promise<unknown>): Promise<APIError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(err instanceof APIError)) throw new Error(`expected an APIError, got ${String(err)}`);
  return err;
}

t.test("Codex's first request is answered, streamed and not", async (t) => {
  const body = codexFirstRequest('parrot', 'Say hello');
  const streamed = await client.responses.stream(body as never).finalResponse();
  t.equal(streamed.status, 'completed');
  t.equal(streamed.output_text, 'parrot says: Say hello', 'the answer to the last user message');
  const whole = await client.responses.create({ ...body, stream: false } as never);
  t.match(whole, { object: 'response', status: 'completed', store: false, output_text: 'parrot says: Say hello' });
  t.match(
    whole.tools,
    [
      { type: 'function', name: 'shell' },
      { type: 'function', name: 'update_plan' },
      { type: 'function', name: 'view_image' },
      { type: 'namespace', name: CODEX_NAMESPACE },
      { type: 'web_search' },
    ],
    'the tools echoed as sent',
  );
  await fx.conforms(t, 2);
});

t.test('a namespaced function is called under its own name and namespace; its result goes back in', async (t) => {
  const body = codexFirstRequest('agent', 'How do I install it?');
  for (const stream of [true, false]) {
    const res = stream ? await client.responses.stream(body as never).finalResponse() : await client.responses.create({ ...body, stream: false } as never);
    const call = res.output.find((o) => o.type === 'function_call');
    t.match(
      call,
      { type: 'function_call', name: CODEX_NAMESPACED_FUNCTION, namespace: CODEX_NAMESPACE, arguments: '{"query":"install"}' },
      `stream ${stream}: the client's name and namespace`,
    );
    if (!call || call.type !== 'function_call') continue;
    t.equal(call.name, CODEX_NAMESPACED_FUNCTION, `stream ${stream}: the function's own name, not the flattened one`);
    const next = await client.responses.create({
      ...body,
      stream: false,
      input: [
        ...(body['input'] as unknown[]),
        ...res.output.filter((o) => o.type === 'reasoning'),
        call,
        { type: 'function_call_output', call_id: call.call_id, output: 'npm install lia' },
      ],
    } as never);
    t.equal(next.output_text, 'the docs say npm install lia', `stream ${stream}: the result was carried back to the model`);
  }
  await fx.conforms(t, 4);
});

t.test('chat completions: untyped-content parts, custom tools and unknown fields are accepted', async (t) => {
  const res = await client.chat.completions.create({
    model: 'parrot',
    messages: [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'ping' }] },
    ],
    tools: [
      { type: 'custom', custom: { name: 'apply_patch' } },
      { type: 'function', function: { name: 'f', parameters: { type: 'object' } } },
    ],
    prompt_cache_key: 'k',
    safety_identifier: 's',
    store: false,
    verbosity: 'low',
    brand_new_field: { x: 1 },
  } as never);
  t.equal(res.choices[0]?.message.content, 'parrot says: ping');
  await fx.conforms(t, 1);
});

t.test('forcing a hosted tool, and wrong types, are 400s naming the field as the client sent it', async (t) => {
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 80; i++) deep = { type: 'object', properties: { a: deep } };
  const base = codexFirstRequest('parrot', 'x');
  const cases: { name: string; body: Record<string, unknown>; param: string; message?: RegExp }[] = [
    { name: 'forced web_search', body: { ...base, tool_choice: { type: 'web_search_preview' } }, param: 'tool_choice.type', message: /cannot run/ },
    { name: 'model missing', body: { ...base, model: undefined }, param: 'model' },
    { name: 'include not an array', body: { ...base, include: 'reasoning.encrypted_content' }, param: 'include' },
    { name: 'store not a boolean', body: { ...base, store: 'no' }, param: 'store' },
    {
      name: 'a deep text.format schema',
      body: { ...base, text: { format: { type: 'json_schema', name: 'n', schema: deep } } },
      param: 'text.format.schema',
      message: /^text\.format\.schema is nested too deeply/,
    },
    {
      name: 'a deep namespaced parameters schema',
      body: { ...base, tools: [{ type: 'namespace', name: 'ns', description: 'd', tools: [{ type: 'function', name: 'f', parameters: deep }] }] },
      param: 'tools[0].tools[0].parameters',
    },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      const err = await refusal(client.responses.create({ ...c.body, stream } as never));
      t.equal(err.status, 400, `${c.name} (stream ${stream}): 400`);
      t.match(err.error, { type: 'invalid_request_error', param: c.param }, `${c.name} (stream ${stream}): OpenAI's error naming ${c.param}`);
      if (c.message) t.match((err.error as { message: string }).message, c.message, `${c.name}: message`);
    }
  }
  const chat = await refusal(
    client.chat.completions.create({
      model: 'parrot',
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ type: 'function', function: { name: 'f', parameters: deep } }],
    } as never),
  );
  t.match(chat, { status: 400, error: { param: 'tools[0].function.parameters' } }, "chat: the client's path of a deep tool schema");
  await fx.conforms(t, 1);
});
