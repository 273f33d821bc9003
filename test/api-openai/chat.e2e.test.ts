/**
 * `/v1/chat/completions` end to end: the official `openai` client against a real appliance with
 * `stories260K-chatml.gguf` created through the store. Every response and chunk the client gets
 * is validated against the OpenAI schemas (see openai-client.ts).
 */
import t from 'tap';
import type { GenerationEvent, InferenceService } from '../../core/index.js';
import { openaiFixture } from './openai-client.js';
import { checkSse, validateOpenAI } from '../helpers/openai-schema.js';

const MODEL = 'stories';
const fx = await openaiFixture(t, { [MODEL]: 'gguf/stories260K-chatml.gguf' });
const { client, app } = fx;
const ask = [{ role: 'user' as const, content: 'Tell me a story about a cat.' }];

t.test('plain chat completion', async (t) => {
  const res = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 12, seed: 1 });
  t.match(res.id, /^chatcmpl-/);
  t.equal(res.object, 'chat.completion');
  t.equal(res.model, 'stories:latest', 'echoes the resolved model name');
  t.ok(Math.abs(res.created - Date.now() / 1000) < 120, 'created is Unix seconds');
  const choice = res.choices[0]!;
  t.equal(choice.message.role, 'assistant');
  t.type(choice.message.content, 'string');
  t.ok(choice.message.content!.length > 0, 'the model wrote text');
  t.ok(['stop', 'length'].includes(choice.finish_reason));
  t.ok(res.usage!.prompt_tokens > 0 && res.usage!.completion_tokens > 0 && res.usage!.completion_tokens <= 12);
  t.equal(res.usage!.total_tokens, res.usage!.prompt_tokens + res.usage!.completion_tokens);
  t.equal(res._request_id, res.id, 'x-request-id carries the completion id');
  await fx.conforms(t);
});

t.test('max_completion_tokens ends with length; seed makes it repeatable', async (t) => {
  const body = { model: MODEL, messages: ask, max_completion_tokens: 8, seed: 42, temperature: 0.9 };
  const a = await client.chat.completions.create(body);
  const b = await client.chat.completions.create(body);
  t.equal(a.choices[0]!.finish_reason, 'length');
  t.equal(a.usage!.completion_tokens, 8);
  t.equal(a.choices[0]!.message.content, b.choices[0]!.message.content, 'same seed, same text');
  await fx.conforms(t, 2);
});

t.test('stop sequences cut the text before the stop string', async (t) => {
  const free = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 40, seed: 7, temperature: 0 });
  const text = free.choices[0]!.message.content!;
  const words = text.split(' ').filter((w) => w.length > 2);
  t.ok(words.length > 2, `enough text to pick a stop word from: ${JSON.stringify(text)}`);
  const stop = words[2]!;
  const cut = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 40, seed: 7, temperature: 0, stop: [stop] });
  const out = cut.choices[0]!.message.content!;
  t.notOk(out.includes(stop), 'stop string is not in the output');
  t.ok(text.startsWith(out), 'output is the prefix before the stop string');
  t.equal(cut.choices[0]!.finish_reason, 'stop');
  await fx.conforms(t, 2);
});

t.test('streamed, with include_usage', async (t) => {
  const stream = await client.chat.completions.create({
    model: MODEL, messages: ask, max_tokens: 10, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  t.same(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '' }, 'role first');
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  const finishes = withChoices.map((c) => c.choices[0]!.finish_reason);
  t.same(finishes.slice(0, -1).filter((f) => f !== null), [], 'finish_reason null until the last');
  t.equal(finishes.at(-1), 'length');
  t.same(withChoices.at(-1)!.choices[0]!.delta, {}, 'final delta empty');
  const last = chunks.at(-1)!;
  t.same(last.choices, [], 'usage chunk last, with no choices');
  t.equal(last.usage!.completion_tokens, 10);
  t.equal(chunks.filter((c) => c.usage).length, 1, 'usage only on the last chunk');
  t.ok(new Set(chunks.map((c) => c.id)).size === 1 && new Set(chunks.map((c) => c.created)).size === 1);
  const text = withChoices.map((c) => c.choices[0]!.delta.content ?? '').join('');
  t.ok(text.length > 0, 'text streamed');
  await fx.conforms(t, chunks.length);
});

t.test('raw SSE framing: data lines only, [DONE], then the end', async (t) => {
  const res = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: ask, max_tokens: 4, stream: true }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^text\/event-stream/);
  const body = await res.text();
  const sse = checkSse(body, 'CreateChatCompletionStreamResponse');
  t.same(sse.failures, [], 'every chunk conforms');
  t.ok(sse.done, 'ends with data: [DONE]');
  t.ok(body.endsWith('data: [DONE]\n\n'));
  t.notOk(sse.chunks.some((c) => 'usage' in c), 'no usage unless asked');
});

t.test('the stream helper checks roles and finish reasons', async (t) => {
  const runner = client.chat.completions.stream({ model: MODEL, messages: ask, max_tokens: 10 });
  let deltas = '';
  runner.on('content', (delta) => (deltas += delta));
  const final = await runner.finalChatCompletion();
  t.equal(final.choices[0]!.message.role, 'assistant');
  t.equal(final.choices[0]!.message.content, deltas, 'content events add up to the final message');
  t.equal(final.choices[0]!.finish_reason, 'length');
  await fx.conforms(t);
});

t.test('conversations as real clients send them', async (t) => {
  const res = await client.chat.completions.create({
    model: MODEL,
    max_tokens: 4,
    messages: [
      { role: 'developer', content: 'You tell short stories.' },
      { role: 'system', content: [{ type: 'text', text: 'Be kind.' }] },
      { role: 'user', content: [{ type: 'text', text: 'What is the weather?' }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'Sunny, 20 C' },
      { role: 'user', content: 'Tell me a story about it.' },
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    tool_choice: 'auto',
    parallel_tool_calls: false,
    user: 'someone',
    store: false,
    metadata: { run: 'e2e' },
    // A field from the future: ignored, never a 400.
    ...({ brand_new_option: { x: 1 } } as object),
  });
  t.equal(res.choices[0]!.message.role, 'assistant');
  t.ok(['stop', 'length', 'tool_calls'].includes(res.choices[0]!.finish_reason));
  await fx.conforms(t);
});

t.test('response_format json_schema is enforced', async (t) => {
  const schema = {
    type: 'object',
    properties: { mood: { type: 'string', enum: ['happy', 'sad'] }, cat: { type: 'boolean' } },
    required: ['mood', 'cat'],
    additionalProperties: false,
  };
  const res = await client.chat.completions.create({
    model: MODEL, messages: ask, max_tokens: 60, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'story_mood', strict: true, schema } },
  });
  const content = res.choices[0]!.message.content!;
  let parsed: unknown;
  t.doesNotThrow(() => (parsed = JSON.parse(content)), `content is JSON: ${content}`);
  t.match(parsed, { mood: /^(happy|sad)$/, cat: Boolean });
  t.same(Object.keys(parsed as object).sort(), ['cat', 'mood']);

  // Any JSON: a story model fills strings without end, so only the opening is checked here.
  const json = await client.chat.completions.create({ model: MODEL, messages: ask, max_tokens: 8, seed: 3, response_format: { type: 'json_object' } });
  t.match(json.choices[0]!.message.content, /^\s*\{/, 'json_object output is a JSON object');
  await fx.conforms(t, 2);
});

t.test('a request refused before the first token keeps its status, streamed or not', async (t) => {
  // The engine refuses format and tools together when generation starts, not when it is queued.
  const body = {
    model: MODEL, messages: ask, max_tokens: 4, response_format: { type: 'json_object' },
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  };
  for (const stream of [false, true]) {
    const res = await app.fetch('/v1/chat/completions', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream }),
    });
    t.equal(res.status, 400, `stream ${stream}: 400`);
    t.match(res.headers.get('content-type'), /^application\/json/);
    const err = await res.json();
    t.same(validateOpenAI('ErrorResponse', err), [], 'OpenAI error envelope');
  }
});

t.test('tools through the stream helper', async (t) => {
  const runner = client.chat.completions.stream({
    model: MODEL, messages: ask, max_tokens: 8,
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }],
  });
  const final = await runner.finalChatCompletion();
  const choice = final.choices[0]!;
  if (choice.finish_reason === 'tool_calls') {
    for (const call of choice.message.tool_calls ?? []) {
      t.match(call, { id: /^call_/, type: 'function', function: { name: 'get_weather' } });
      t.doesNotThrow(() => JSON.parse((call as { function: { arguments: string } }).function.arguments));
    }
  } else {
    t.ok(['stop', 'length'].includes(choice.finish_reason), 'a text answer ends normally');
  }
  await fx.conforms(t);
});

t.test('a client that drops a stream cancels the generation', async (t) => {
  const inference = app.hooks.inference.get() as InferenceService;
  const original = inference.chat.bind(inference);
  let signal: AbortSignal | undefined;
  let produced = 0;
  let finished = false;
  let sawDone = false;
  inference.chat = async (request, s) => {
    signal = s;
    const stream = await original(request, s);
    const events = stream.events;
    return {
      ...stream,
      events: (async function* (): AsyncIterable<GenerationEvent> {
        try {
          for await (const e of events) {
            if (e.type === 'token') produced++;
            if (e.type === 'done') sawDone = true;
            // Paced like a big model, so the disconnect lands mid-generation.
            await new Promise((r) => setTimeout(r, 10));
            yield e;
          }
        } finally {
          finished = true;
        }
      })(),
    };
  };
  t.teardown(() => void (inference.chat = original));

  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: MODEL, messages: [{ role: 'user', content: 'Tell me a long story.' }], max_tokens: 1500, stream: true },
    { signal: controller.signal },
  );
  let received = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta.content) received++;
      if (received === 3) controller.abort();
    }
  } catch {
    // openai-node may end the iteration quietly or throw its abort error: both are fine.
  }
  t.equal(received, 3, 'the client read three pieces, then hung up');
  for (let i = 0; i < 100 && !finished; i++) await new Promise((r) => setTimeout(r, 50));
  t.ok(signal?.aborted, 'the engine was handed a signal that fired');
  t.ok(finished, 'the generation ended');
  t.notOk(sawDone, `the route stopped reading before the end (${produced} tokens read)`);
  const after = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
  t.equal(after.choices[0]!.message.role, 'assistant', 'the appliance serves the next request');
  await fx.conforms(t, 1);
});
