/**
 * `/v1/chat/completions` end to end: the official `openai` client against a real appliance with
 * `stories260K-chatml.gguf` created through the store. Every response and chunk the client gets
 * is validated against the OpenAI schemas (see openai-client.ts).
 */
import t, { type Test } from 'tap';
import type { GenerationEvent } from 'lia/engine';
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
    model: MODEL,
    messages: ask,
    max_tokens: 10,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  t.same(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '' }, 'role first');
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  const finishes = withChoices.map((c) => c.choices[0]!.finish_reason);
  t.same(
    finishes.slice(0, -1).filter((f) => f !== null),
    [],
    'finish_reason null until the last',
  );
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
  t.notOk(
    sse.chunks.some((c) => 'usage' in c),
    'no usage unless asked',
  );
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
    model: MODEL,
    messages: ask,
    max_tokens: 60,
    seed: 3,
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

t.test('an output format beside tools the model may call: the answer is in the format, on every engine', async (t) => {
  // The request plan decides it once: the prompt lists the tools, the answer is sampled under the
  // format's grammar. A prompt past the context is test/engine/context-errors.model.test.ts.
  const body = {
    model: MODEL,
    messages: ask,
    max_tokens: 4,
    response_format: { type: 'json_object' },
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
  };
  for (const stream of [false, true]) {
    const res = await app.fetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream }),
    });
    t.equal(res.status, 200, `stream ${stream}: 200`);
    const text = await res.text();
    t.match(
      stream ? text : (JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]!.message.content,
      stream ? /"content":"\{/ : /^\{/,
      'the answer opens a JSON object',
    );
  }
});

t.test('tools through the stream helper', async (t) => {
  const runner = client.chat.completions.stream({
    model: MODEL,
    messages: ask,
    max_tokens: 8,
    tools: [
      {
        type: 'function',
        function: {
          name: 'get_weather',
          description: 'Weather of a city',
          parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
        },
      },
    ],
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

const weatherAndTime = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
  {
    type: 'function' as const,
    function: { name: 'get_time', description: 'Time in a zone', parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] } },
  },
];
const askWeather = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];
/** A request that must answer with a call of one of the weather tools (greedy, fixed seed). */
const forcedCall = (maxTokens: number) =>
  ({ model: MODEL, messages: askWeather, tools: weatherAndTime, tool_choice: 'required', max_tokens: maxTokens, seed: 1, temperature: 0 }) as const;

/** The arguments of a call, parsed: must be a JSON object. */
function parsedArguments(t: Test, args: string): Record<string, unknown> {
  let parsed: unknown;
  t.doesNotThrow(() => (parsed = JSON.parse(args)), `arguments are JSON: ${args}`);
  t.ok(parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed), 'arguments are an object');
  return parsed as Record<string, unknown>;
}

t.test('tool_choice required forces one call of one of the tools', async (t) => {
  // The fixture writes nonsense: only the structure is checked, never what it says.
  const res = await client.chat.completions.create(forcedCall(200));
  const choice = res.choices[0]!;
  t.equal(choice.finish_reason, 'tool_calls');
  t.equal(choice.message.content, null, 'no text next to the call');
  const calls = choice.message.tool_calls ?? [];
  t.equal(calls.length, 1, 'one call');
  const call = calls[0] as { id: string; type: string; function: { name: string; arguments: string } };
  t.match(call, { id: /^call_/, type: 'function' });
  t.ok(['get_weather', 'get_time'].includes(call.function.name), `a tool's name: ${call.function.name}`);
  const args = parsedArguments(t, call.function.arguments);
  const key = call.function.name === 'get_weather' ? 'city' : 'zone';
  t.same(Object.keys(args), [key], "the tool's required parameter, nothing else");
  t.type(args[key], 'string');
  t.ok(res.usage!.completion_tokens > 0);
  await fx.conforms(t);
});

t.test('a named tool_choice forces a call of that tool', async (t) => {
  for (const seed of [1, 2]) {
    const res = await client.chat.completions.create({
      model: MODEL,
      messages: askWeather,
      tools: weatherAndTime,
      max_tokens: 200,
      seed,
      temperature: 0,
      tool_choice: { type: 'function', function: { name: 'get_time' } },
    });
    const choice = res.choices[0]!;
    t.equal(choice.finish_reason, 'tool_calls', `seed ${seed}: tool_calls`);
    t.equal(choice.message.tool_calls?.length, 1);
    const call = choice.message.tool_calls![0] as { function: { name: string; arguments: string } };
    t.equal(call.function.name, 'get_time', 'the named tool');
    const args = parsedArguments(t, call.function.arguments);
    t.type(args.zone, 'string', 'zone (required by the schema) is a string');
  }
  await fx.conforms(t, 2);
});

t.test('a forced call streamed: one tool-call delta, finish_reason tool_calls', async (t) => {
  const stream = await client.chat.completions.create({ ...forcedCall(200), stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  t.same(chunks[0]!.choices[0]!.delta, { role: 'assistant', content: '' }, 'role first');
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  t.notOk(
    withChoices.some((c) => c.choices[0]!.delta.content),
    'no JSON text streamed as content',
  );
  const fragments = withChoices.flatMap((c) => c.choices[0]!.delta.tool_calls ?? []);
  t.ok(fragments.length >= 1, 'tool-call deltas');
  for (const f of fragments) t.equal(f.index, 0, 'every fragment has the index');
  t.match(fragments[0], { index: 0, id: /^call_/, type: 'function', function: { name: /^(get_weather|get_time)$/ } }, 'the first has id, type and name');
  parsedArguments(t, fragments.map((f) => f.function?.arguments ?? '').join(''));
  const finishes = withChoices.map((c) => c.choices[0]!.finish_reason);
  t.same(
    finishes.slice(0, -1).filter((f) => f !== null),
    [],
    'finish_reason null until the last',
  );
  t.equal(finishes.at(-1), 'tool_calls');
  t.ok(chunks.at(-1)!.usage!.completion_tokens > 0, 'usage last');

  // The stream helper assembles the same call.
  const runner = client.chat.completions.stream({
    model: MODEL,
    messages: askWeather,
    tools: weatherAndTime,
    max_tokens: 200,
    seed: 1,
    temperature: 0,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
  });
  const final = await runner.finalChatCompletion();
  t.equal(final.choices[0]!.finish_reason, 'tool_calls');
  const call = final.choices[0]!.message.tool_calls![0] as { function: { name: string; arguments: string } };
  t.equal(call.function.name, 'get_weather');
  t.type(parsedArguments(t, call.function.arguments).city, 'string');
  await fx.conforms(t, chunks.length + 1);
});

t.test('a forced call cut by max_tokens ends with length and no call', async (t) => {
  const res = await client.chat.completions.create(forcedCall(3));
  const choice = res.choices[0]!;
  t.equal(choice.finish_reason, 'length');
  t.equal(choice.message.tool_calls, undefined, 'no partial call');
  t.equal(choice.message.content, '', 'and no partial JSON as text');
  t.equal(res.usage!.completion_tokens, 3);
  await fx.conforms(t);
});

t.test('forced calls: a tool schema the grammar cannot express, or no tools, is a 400', async (t) => {
  const unsupported = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { allOf: [{ type: 'string' }] } } } } }];
  // The plan refuses what the answer grammar cannot express, on every engine alike.
  const cases = [
    { tools: unsupported, tool_choice: 'required', message: /allOf/ },
    { tools: unsupported, tool_choice: { type: 'function', function: { name: 'f' } }, message: /allOf/ },
    { tool_choice: 'required', message: /tools/ },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      const res = await app.fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: askWeather, max_tokens: 4, stream, tools: c.tools, tool_choice: c.tool_choice }),
      });
      t.equal(res.status, 400, `${JSON.stringify(c.tool_choice)}, stream ${stream}: 400`);
      const err = (await res.json()) as { error: { type: string; message: string } };
      t.same(validateOpenAI('ErrorResponse', err), [], 'OpenAI error envelope');
      t.equal(err.error.type, 'invalid_request_error');
      t.match(err.error.message, c.message);
    }
  }
  // auto with the same schema keeps today's behaviour (node-llama-cpp's function calling).
  const auto = await client.chat.completions.create({ model: MODEL, messages: askWeather, max_tokens: 4, tools: unsupported as never });
  t.ok(['stop', 'length', 'tool_calls'].includes(auto.choices[0]!.finish_reason));
  await fx.conforms(t);
});

t.test('a client that drops a stream cancels the generation', async (t) => {
  const inference = app.hooks.extensions.get('inference');
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
