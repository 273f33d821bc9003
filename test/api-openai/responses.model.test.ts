/**
 * `/v1/responses` end to end: the official `openai` client's Responses API against a real
 * appliance with `stories260K-chatml.gguf`. Every body and every stream event the client receives
 * is validated against the OpenAI schemas (`Response`, the `ResponseStreamEvent` union, the
 * error response) on the way in; see openai-client.ts.
 */
import t, { type Test } from 'tap';
import OpenAI from 'openai';
import { openaiFixture } from './openai-client.js';
import { checkResponseSse } from '../helpers/openai-schema.js';

const MODEL = 'stories';
const fx = await openaiFixture(t, { [MODEL]: 'gguf/stories260K-chatml.gguf' });
const { client, app } = fx;
const ask = 'Tell me a story about a cat.';

const weather = {
  type: 'function' as const,
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: true,
};

/** The arguments of a call, parsed: must be a JSON object. */
function parsedArguments(t: Test, args: string): Record<string, unknown> {
  let parsed: unknown;
  t.doesNotThrow(() => (parsed = JSON.parse(args)), `arguments are JSON: ${args}`);
  t.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'arguments are an object');
  return parsed as Record<string, unknown>;
}

t.test('a plain response, with instructions, cut by max_output_tokens', async (t) => {
  const res = await client.responses.create({
    model: MODEL,
    input: [{ role: 'user', content: [{ type: 'input_text', text: ask }] }],
    instructions: 'You tell short stories.',
    max_output_tokens: 6,
    temperature: 0,
    store: false,
    metadata: { case: 'plain' },
    user: 'u1',
  });
  t.match(res.id, /^resp_/);
  t.equal(res.object, 'response');
  t.equal(res.model, 'stories:latest', 'echoes the resolved model name');
  t.ok(Math.abs(res.created_at - Date.now() / 1000) < 120, 'created_at is Unix seconds');
  t.equal(res.status, 'incomplete');
  t.same(res.incomplete_details, { reason: 'max_output_tokens' });
  t.equal(res.instructions, 'You tell short stories.');
  t.match(res, { max_output_tokens: 6, temperature: 0, top_p: null, metadata: { case: 'plain' }, store: false, error: null });
  t.equal(res.output.length, 1);
  const message = res.output[0]!;
  t.match(message, { type: 'message', id: /^msg_/, role: 'assistant', status: 'incomplete' });
  t.ok(res.output_text.length > 0, `the model wrote text: ${JSON.stringify(res.output_text)}`);
  t.match(res.usage, { output_tokens: 6 });
  t.ok(res.usage!.input_tokens > 0);
  t.equal(res.usage!.total_tokens, res.usage!.input_tokens + res.usage!.output_tokens);
  t.equal(res._request_id, res.id, 'x-request-id carries the response id');
  t.equal(res.completed_at, null, 'not completed');
  await fx.conforms(t);
});

t.test('streamed with stream: true', async (t) => {
  const stream = await client.responses.create({ model: MODEL, input: ask, max_output_tokens: 10, stream: true });
  const events = [];
  for await (const e of stream) events.push(e);
  const types = events.map((e) => e.type);
  t.same(types.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
  t.same(types.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
  const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : []));
  t.ok(deltas.length > 1, 'many deltas');
  const last = events.at(-1) as OpenAI.Responses.ResponseIncompleteEvent;
  t.equal(last.response.output_text ?? deltas.join(''), deltas.join(''));
  const item = last.response.output[0] as OpenAI.Responses.ResponseOutputMessage;
  t.equal((item.content[0] as OpenAI.Responses.ResponseOutputText).text, deltas.join(''), 'the deltas add up to the final text');
  t.equal(last.response.usage!.output_tokens, 10);
  t.same(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
    'sequence numbers count from 0',
  );
  await fx.conforms(t, events.length);
});

t.test('the stream helper and finalResponse()', async (t) => {
  const runner = client.responses.stream({ model: MODEL, input: ask, instructions: 'Be kind.', max_output_tokens: 8 });
  let text = '';
  runner.on('response.output_text.delta', (e) => (text += e.delta));
  const final = await runner.finalResponse();
  t.equal(final.output_text, text, 'the deltas add up to the final text');
  t.equal(final.status, 'incomplete');
  t.equal(final.instructions, 'Be kind.');
  await fx.conforms(t);
});

t.test('raw SSE framing: named events, no [DONE]', async (t) => {
  const res = await app.fetch('/v1/responses', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, input: ask, max_output_tokens: 3, stream: true }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const body = await res.text();
  t.match(body, /^event: response\.created\ndata: \{/);
  const sse = checkResponseSse(body);
  t.same(sse.failures, [], 'framing and every event conform');
  t.equal(sse.events.at(-1)!.type, 'response.incomplete');
});

t.test('a forced function call, then its result sent back', async (t) => {
  const forced: OpenAI.Responses.ResponseCreateParamsNonStreaming = {
    model: MODEL,
    input: 'What is the weather in Paris?',
    tools: [weather],
    tool_choice: { type: 'function', name: 'get_weather' },
    max_output_tokens: 200,
    temperature: 0,
  };
  const res = await client.responses.create(forced);
  t.equal(res.status, 'completed');
  t.equal(res.output.length, 1, 'one item: the call, no text');
  const call = res.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  t.match(call, { type: 'function_call', id: /^fc_/, call_id: /^call_/, name: 'get_weather', status: 'completed' });
  t.type(parsedArguments(t, call.arguments).city, 'string');
  t.match(res.tools, [{ type: 'function', name: 'get_weather', strict: true }]);
  t.same(res.tool_choice, { type: 'function', name: 'get_weather' });

  // Streamed, the call comes as one arguments delta.
  const stream = await client.responses.create({ ...forced, stream: true });
  const events = [];
  for await (const e of stream) events.push(e);
  t.same(events.map((e) => e.type).slice(2), [
    'response.output_item.added',
    'response.function_call_arguments.delta',
    'response.function_call_arguments.done',
    'response.output_item.done',
    'response.completed',
  ]);
  const argsDone = events.find((e) => e.type === 'response.function_call_arguments.done') as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
  parsedArguments(t, argsDone.arguments);

  // The round trip: the call and its output go back as input items.
  const next = await client.responses.create({
    model: MODEL,
    max_output_tokens: 6,
    tools: [weather],
    input: [{ role: 'user', content: 'What is the weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'Sunny, 20 C' }],
  });
  t.ok(next.status === 'completed' || next.status === 'incomplete', 'answers the conversation');
  await fx.conforms(t, events.length + 2);
});

t.test('text.format json_schema gives JSON that parses', async (t) => {
  const schema = {
    type: 'object',
    properties: { mood: { type: 'string', enum: ['happy', 'sad'] }, stars: { type: 'integer' } },
    required: ['mood', 'stars'],
    additionalProperties: false,
  };
  const res = await client.responses.create({
    model: MODEL,
    input: ask,
    max_output_tokens: 60,
    temperature: 0,
    text: { format: { type: 'json_schema', name: 'story_mood', schema, strict: true } },
  });
  t.equal(res.status, 'completed', 'the grammar ends the JSON before the limit');
  t.equal(res.incomplete_details, null);
  t.type(res.completed_at, 'number');
  let parsed: { mood?: unknown; stars?: unknown } = {};
  t.doesNotThrow(() => (parsed = JSON.parse(res.output_text)), `JSON: ${res.output_text}`);
  t.ok(['happy', 'sad'].includes(parsed.mood as string), 'follows the schema');
  t.ok(Number.isInteger(parsed.stars));
  t.match(res.text, { format: { type: 'json_schema', name: 'story_mood', strict: true } });
  await fx.conforms(t);
});

t.test('previous_response_id is a 400 in OpenAI error shape (the server is stateless)', async (t) => {
  for (const stream of [false, true]) {
    const err = await client.responses.create({ model: MODEL, input: 'hi', previous_response_id: 'resp_123', stream }).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(err instanceof OpenAI.BadRequestError, `stream ${stream}: a BadRequestError`);
    const e = err as InstanceType<typeof OpenAI.BadRequestError>;
    t.equal(e.status, 400);
    t.match(e.error, { type: 'invalid_request_error', param: 'previous_response_id', code: null, message: /stateless/ });
  }
  const unknown = await client.responses.create({ model: 'no-such-model', input: 'hi' }).catch((e: unknown) => e);
  t.ok(unknown instanceof OpenAI.NotFoundError, 'an unknown model is a 404');
  t.match((unknown as InstanceType<typeof OpenAI.NotFoundError>).error, { param: 'model', code: 'model_not_found' });
  await fx.conforms(t, 3);
});
