/**
 * `/v1/messages` end to end: the official `@anthropic-ai/sdk` client against one real appliance
 * with `stories260K-chatml.gguf` created through the store. The client sends the key in
 * `x-api-key`, as Claude Code does.
 */
import Anthropic from '@anthropic-ai/sdk';
import t from 'tap';
import { fetch as undiciFetch } from 'undici';
import { startTestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';

const MODEL = 'stories';
const app = await startTestAppliance({ plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } });
t.teardown(() => app.close());
await createModel(app, MODEL, 'gguf/stories260K-chatml.gguf');

/** Undici's fetch trusting the appliance's CA. */
const trusted = ((input: string, init: Record<string, unknown> = {}) =>
  undiciFetch(input, { ...init, dispatcher: app.dispatcher() })) as unknown as typeof fetch;
const clientWith = (apiKey: string) => new Anthropic({ baseURL: app.url, apiKey, fetch: trusted, maxRetries: 0 });
const client = clientWith(app.key);
/**
 * Sampling fields the server takes (`temperature`, `top_k`) that this SDK version's types leave
 * out; the SDK sends them as given.
 */
const sampling = (fields: { temperature?: number; top_k?: number }): object => fields;
const greedy = sampling({ temperature: 0 });
/** The error a promise rejects with (null when it resolves). */
const failure = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => null,
    (err: unknown) => err,
  );
const ask = [{ role: 'user' as const, content: 'Tell me a story about a cat.' }];

t.test('messages.create: a message with text, a stop reason and usage', async (t) => {
  const res = await client.messages.create({ model: MODEL, max_tokens: 12, messages: ask, system: 'You tell stories.', metadata: { user_id: 'u1' } });
  t.match(res.id, /^msg_/);
  t.equal(res.type, 'message');
  t.equal(res.role, 'assistant');
  t.equal(res.model, 'stories:latest', 'echoes the resolved model name');
  t.equal(res.content[0]?.type, 'text');
  t.ok(res.content[0]?.type === 'text' && res.content[0].text.length > 0, 'the model wrote text');
  t.ok(['end_turn', 'max_tokens'].includes(res.stop_reason!));
  t.ok(res.usage.input_tokens > 0 && res.usage.output_tokens > 0 && res.usage.output_tokens <= 12);
  t.equal(res._request_id, res.id, 'request-id carries the message id');
});

t.test('max_tokens ends with max_tokens; a stop sequence ends with stop_sequence', async (t) => {
  const cut = await client.messages.create({ model: MODEL, max_tokens: 6, messages: ask, ...sampling({ temperature: 0, top_k: 1 }) });
  t.equal(cut.stop_reason, 'max_tokens');
  t.equal(cut.usage.output_tokens, 6);
  const free = await client.messages.create({ model: MODEL, max_tokens: 40, messages: ask, ...greedy });
  const text = free.content[0]?.type === 'text' ? free.content[0].text : '';
  const word = text.split(' ').filter((w) => w.length > 2)[2];
  t.ok(word, `enough text to pick a stop word from: ${JSON.stringify(text)}`);
  const stopped = await client.messages.create({ model: MODEL, max_tokens: 40, messages: ask, ...greedy, stop_sequences: [word!] });
  t.equal(stopped.stop_reason, 'stop_sequence');
  t.equal(stopped.stop_sequence, word);
  const out = stopped.content[0]?.type === 'text' ? stopped.content[0].text : '';
  t.ok(text.startsWith(out) && !out.includes(word!), 'the text before the stop sequence');
});

t.test('messages.stream: text events and the final message', async (t) => {
  const stream = client.messages.stream({ model: MODEL, max_tokens: 10, messages: ask });
  let streamed = '';
  stream.on('text', (delta) => (streamed += delta));
  const final = await stream.finalMessage();
  t.ok(streamed.length > 0, 'text events arrived');
  t.equal(final.content[0]?.type === 'text' && final.content[0].text, streamed, 'the final message holds the streamed text');
  t.equal(final.stop_reason, 'max_tokens');
  t.equal(final.usage.output_tokens, 10);
  t.ok(final.usage.input_tokens > 0, 'input_tokens arrive with message_delta');
});

t.test('raw SSE framing: named events in order, no [DONE]', async (t) => {
  const res = await app.fetch('/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 4, messages: ask, stream: true }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const frames = (await res.text()).trim().split('\n\n');
  const names = frames.map((f) => /^event: (\S+)\ndata: /.exec(f)?.[1]);
  t.same(names.slice(0, 3), ['message_start', 'ping', 'content_block_start']);
  t.same(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  for (const f of frames) t.equal(JSON.parse(f.split('\ndata: ')[1]!).type, /^event: (\S+)/.exec(f)![1], 'each frame names its type');
  t.notOk(frames.some((f) => f.includes('[DONE]')));
});

const weather = {
  name: 'get_weather',
  description: 'The weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
};

t.test('a forced tool call comes back as a tool_use block with an input object', async (t) => {
  const res = await client.messages.create({
    model: MODEL,
    max_tokens: 128,
    ...greedy,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [weather],
    tool_choice: { type: 'tool', name: 'get_weather' },
  });
  t.equal(res.stop_reason, 'tool_use');
  const call = res.content.find((b) => b.type === 'tool_use');
  t.ok(call, 'a tool_use block');
  if (call?.type !== 'tool_use') return;
  t.equal(call.name, 'get_weather');
  t.match(call.id, /^toolu_/);
  t.type(call.input, 'object');
  t.type((call.input as Record<string, unknown>)['city'], 'string', 'input follows the schema');

  // The same, streamed: the SDK rebuilds the input from input_json_delta.
  const final = await client.messages
    .stream({
      model: MODEL,
      max_tokens: 128,
      ...greedy,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [weather],
      tool_choice: { type: 'any' },
    })
    .finalMessage();
  const streamed = final.content.find((b) => b.type === 'tool_use');
  t.ok(streamed?.type === 'tool_use' && typeof (streamed.input as Record<string, unknown>)['city'] === 'string', 'streamed tool_use input');
  t.equal(final.stop_reason, 'tool_use');

  // A conversation that carries the call and its result is accepted.
  const next = await client.messages.create({
    model: MODEL,
    max_tokens: 8,
    tools: [weather],
    messages: [
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: call.id, name: call.name, input: call.input }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'Sunny, 21 °C' }] },
    ],
  });
  t.equal(next.type, 'message');
});

t.test('a repeated system prompt is reported as read from the cache, as an agent sees it', async (t) => {
  // Over 1,024 characters: what llama-server's slot placement copies between conversations.
  const system = 'You are a careful assistant who tells short stories about animals. '.repeat(18);
  const first = await client.messages.create({ model: MODEL, max_tokens: 2, ...greedy, system, messages: [{ role: 'user', content: 'A cat.' }] });
  const next = await client.messages.create({ model: MODEL, max_tokens: 2, ...greedy, system, messages: [{ role: 'user', content: 'A dog.' }] });
  const total = (m: Anthropic.Message) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0);
  t.equal(next.usage.cache_creation_input_tokens, 0, 'the engine caches without a separate write');
  t.ok((next.usage.cache_read_input_tokens ?? 0) > 40, `the system prompt came from the cache (${next.usage.cache_read_input_tokens} tokens)`);
  t.ok(next.usage.input_tokens < total(next), `only the new turn was evaluated (${next.usage.input_tokens})`);
  t.ok(Math.abs(total(next) - total(first)) <= 2, 'both prompts have about the same length');
});

t.test('countTokens counts the prompt as messages.create does', async (t) => {
  const counted = await client.messages.countTokens({ model: MODEL, messages: ask, system: 'You tell stories.' });
  const res = await client.messages.create({ model: MODEL, max_tokens: 1, messages: ask, system: 'You tell stories.' });
  t.ok(counted.input_tokens > 0);
  const cached = res.usage.cache_read_input_tokens ?? 0;
  t.equal(counted.input_tokens, res.usage.input_tokens + cached, 'evaluated and cached tokens add up to the counted prompt');
  const longer = await client.messages.countTokens({
    model: MODEL,
    messages: [...ask, { role: 'assistant', content: 'Once upon a time' }, { role: 'user', content: 'Go on.' }],
  });
  t.ok(longer.input_tokens > counted.input_tokens - 6, 'a longer conversation counts more than its first turn without the system prompt');
  // Counted whole by the tokenizer, not cut to the context (512 tokens here) as a chat would be.
  const long = 'The cat sat on the mat and looked at the dog. '.repeat(80);
  const whole = await client.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: long }] });
  t.ok(whole.input_tokens > 512, `${whole.input_tokens} tokens, more than the context holds`);
});

t.test("errors come in Anthropic's shape and SDK classes", async (t) => {
  const noMax = await app.fetch('/v1/messages', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: ask }),
  });
  t.equal(noMax.status, 400);
  const body = (await noMax.json()) as { type: string; error: { type: string; message: string } };
  t.equal(body.type, 'error');
  t.equal(body.error.type, 'invalid_request_error');
  t.match(body.error.message, /max_tokens/);

  const missing = await failure(client.messages.create({ model: 'no-such-model', max_tokens: 4, messages: ask }));
  t.ok(missing instanceof Anthropic.NotFoundError, 'an unknown model is a NotFoundError');
  t.match(missing, { status: 404, error: { type: 'error', error: { type: 'not_found_error', message: /no-such-model/ } } });

  const image = { type: 'image' as const, source: { type: 'base64' as const, media_type: 'image/png' as const, data: 'iVBORw0KGgo=' } };
  const refused = await failure(client.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: [image] }] }));
  t.ok(refused instanceof Anthropic.BadRequestError, 'an image to a model without vision is a BadRequestError');
  t.match(refused, { status: 400, error: { error: { type: 'invalid_request_error', message: /does not support vision/ } } });

  const denied = await failure(clientWith('lia_wrong').messages.create({ model: MODEL, max_tokens: 4, messages: ask }));
  t.ok(denied instanceof Anthropic.AuthenticationError, 'a wrong x-api-key is an AuthenticationError');
  t.match(denied, { status: 401, error: { type: 'error', error: { type: 'authentication_error' } } });
});

t.test('x-api-key and Authorization: Bearer both authenticate; anthropic-version is ignored', async (t) => {
  const req = (headers: Record<string, string>) =>
    app.fetch('/v1/messages', {
      method: 'POST',
      auth: false,
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
      body: JSON.stringify({ model: MODEL, max_tokens: 2, messages: ask }),
    });
  t.equal((await req({ 'x-api-key': app.key })).status, 200, 'x-api-key');
  t.equal((await req({ authorization: `Bearer ${app.key}` })).status, 200, 'Bearer');
  const typo = app.key.slice(0, 10) + (app.key[10] === 'A' ? 'B' : 'A') + app.key.slice(11);
  const mistyped = await req({ 'x-api-key': typo });
  t.equal(mistyped.status, 401);
  t.match(await mistyped.json(), { error: { type: 'authentication_error', message: /typo/ } }, "auth-api-key's checks apply to x-api-key");
  const none = await req({});
  t.equal(none.status, 401);
  t.match(await none.json(), { type: 'error', error: { type: 'authentication_error' } });
});
