/**
 * `backend-upstream` on the wire, observed from upstreams of the test's own (fake-upstream.ts), one
 * per flavour: tools, tool choice and structured output reach the upstream as the client gave them,
 * and the upstream's tool call comes back in each surface's shape; the key that `key_env` names
 * is the bearer LIA sends (a variable that is not set stops the start with exit 2); a client that
 * goes away mid-stream cancels the upstream request.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { main } from '../../core/cli/main.js';
import { waitFor } from '../helpers/wait.js';
import { CALL_ARGUMENTS, CALL_ID, FakeUpstream, ndjsonLines, FRONT_UNUSED, sseFrames, startFront, STRUCTURED, type Seen } from './fake-upstream.js';

const KEY_VAR = 'LIA_TEST_WIRE_UPSTREAM_KEY';
const UPSTREAM_KEY = 'sk-wire-upstream-0123456789';
process.env[KEY_VAR] = UPSTREAM_KEY;
t.teardown(() => void delete process.env[KEY_VAR]);

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      description: 'The time in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const SCHEMA = { type: 'object', properties: { answer: { type: 'integer' } }, required: ['answer'], additionalProperties: false };
const weather = [{ role: 'user', content: 'What is the weather in Paris?' }];
const hi = [{ role: 'user', content: 'hi' }];

const openaiUp = await new FakeUpstream('wire-openai', 'openai').start();
const ollamaUp = await new FakeUpstream('wire-ollama', 'ollama').start();
t.teardown(() => openaiUp.close());
t.teardown(() => ollamaUp.close());

const front = await startFront([
  // `oa` and `ol` are the LIA names; the upstreams know the models by other names.
  { name: 'wire-openai', url: openaiUp.url, flavour: 'openai', key_env: KEY_VAR, models: [{ model: 'org/Tool-Model', name: 'oa' }] },
  { name: 'wire-ollama', url: ollamaUp.url, flavour: 'ollama', models: [{ model: 'tool-model:8b', name: 'ol' }] },
]);
// The upstreams go first: a request one still holds open would keep the front's close waiting.
t.teardown(async () => {
  await Promise.all([openaiUp.close(), ollamaUp.close()]);
  await front.close();
});
const post = (p: string, body: unknown, init: { signal?: AbortSignal } = {}) =>
  front.fetch(p, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), ...init });

type OpenAICall = { id: string; type: string; function: { name: string; arguments: string } };
type Completion = { choices: Array<{ finish_reason: string; message: { content: string | null; tool_calls?: OpenAICall[] } }> };
type OllamaChat = { message: { content: string; tool_calls?: Array<{ function: { name: string; arguments: unknown } }> }; done: boolean };

/** Sends one request and returns the client's answer and the one request the upstream received for it. */
async function exchange(up: FakeUpstream, p: string, body: unknown): Promise<{ status: number; text: string; seen: Seen | undefined }> {
  const before = up.chats().length;
  const res = await post(p, body);
  const text = await res.text();
  const chats = up.chats();
  return { status: res.status, text, seen: chats.length === before + 1 ? chats.at(-1) : undefined };
}

t.test('/v1/chat/completions: tools and tool_choice reach an OpenAI upstream, its call comes back as tool_calls', async (t) => {
  const required = await exchange(openaiUp, '/v1/chat/completions', { model: 'oa', messages: weather, tools: TOOLS, tool_choice: 'required' });
  t.equal(required.status, 200, required.text);
  t.ok(required.seen, 'exactly one request reached the upstream');
  t.equal(required.seen?.path, '/v1/chat/completions');
  t.equal(required.seen?.body['model'], 'org/Tool-Model', "under the model's name on the upstream");
  t.same(required.seen?.body['tools'], TOOLS, 'the tools as the client sent them');
  t.equal(required.seen?.body['tool_choice'], 'required', 'the tool choice');
  const done = JSON.parse(required.text) as Completion;
  t.equal(done.choices[0]?.finish_reason, 'tool_calls');
  t.equal(done.choices[0]?.message.tool_calls?.length, 1, 'one tool call');
  const call = done.choices[0]?.message.tool_calls?.[0];
  t.match(call, { id: CALL_ID, type: 'function', function: { name: 'get_weather', arguments: String } }, "the upstream's call, its id kept");
  t.same(JSON.parse(call?.function.arguments ?? 'null'), CALL_ARGUMENTS, 'its arguments whole (sent in fragments), as a JSON string');

  const choice = { type: 'function', function: { name: 'get_time' } };
  const named = await exchange(openaiUp, '/v1/chat/completions', { model: 'oa', messages: weather, tools: TOOLS, tool_choice: choice });
  t.equal(named.status, 200, named.text);
  t.same(named.seen?.body['tool_choice'], choice, 'a named tool choice');
  t.ok(
    (named.seen?.body['tools'] as typeof TOOLS | undefined)?.some((x) => x.function.name === 'get_time'),
    'with the tool it names',
  );
  t.equal((JSON.parse(named.text) as Completion).choices[0]?.message.tool_calls?.[0]?.function.name, 'get_time', 'the named tool is called');

  const streamed = await exchange(openaiUp, '/v1/chat/completions', { model: 'oa', messages: weather, tools: TOOLS, stream: true });
  t.equal(streamed.status, 200, streamed.text);
  t.same(streamed.seen?.body['tools'], TOOLS, 'streamed: the tools');
  t.notOk(streamed.seen && 'tool_choice' in streamed.seen.body, 'no tool choice asked, none sent');
  const chunks = sseFrames(streamed.text) as Array<{ choices: Array<{ delta: { tool_calls?: OpenAICall[] }; finish_reason: string | null }> }>;
  const deltas = chunks.flatMap((c) => c.choices.flatMap((x) => x.delta.tool_calls ?? []));
  t.equal(deltas.length, 1, 'streamed: the call in one delta');
  t.match(deltas[0], { id: CALL_ID, function: { name: 'get_weather' } });
  t.same(JSON.parse(deltas[0]?.function.arguments ?? 'null'), CALL_ARGUMENTS);
  t.equal(chunks.flatMap((c) => c.choices).at(-1)?.finish_reason, 'tool_calls', 'streamed: finish_reason tool_calls');
});

t.test('/v1/chat/completions: response_format json_schema reaches an OpenAI upstream as a json_schema response_format', async (t) => {
  const rf = { type: 'json_schema', json_schema: { name: 'reply', schema: SCHEMA, strict: true } };
  const res = await exchange(openaiUp, '/v1/chat/completions', { model: 'oa', messages: hi, response_format: rf });
  t.equal(res.status, 200, res.text);
  const sent = res.seen?.body['response_format'] as { type: string; json_schema: { schema: unknown } } | undefined;
  t.equal(sent?.type, 'json_schema', 'a json_schema response_format');
  t.same(sent?.json_schema.schema, SCHEMA, 'carrying the schema the client gave');
  t.same(JSON.parse((JSON.parse(res.text) as Completion).choices[0]?.message.content ?? 'null'), STRUCTURED, "the upstream's structured answer");
});

t.test('/api/chat: tools and format reach an Ollama upstream as they are, its call comes back in message.tool_calls', async (t) => {
  const res = await exchange(ollamaUp, '/api/chat', { model: 'ol', messages: weather, tools: TOOLS, format: SCHEMA, stream: false });
  t.equal(res.status, 200, res.text);
  t.ok(res.seen, 'exactly one request reached the upstream');
  t.equal(res.seen?.path, '/api/chat');
  t.equal(res.seen?.body['model'], 'tool-model:8b', "under the model's name on the upstream");
  t.same(res.seen?.body['tools'], TOOLS, 'the tools');
  t.same(res.seen?.body['format'], SCHEMA, 'the format');
  const body = JSON.parse(res.text) as OllamaChat;
  t.equal(body.message.tool_calls?.length, 1, 'one tool call');
  t.equal(body.message.tool_calls?.[0]?.function.name, 'get_weather');
  t.same(body.message.tool_calls?.[0]?.function.arguments, CALL_ARGUMENTS, 'its arguments as an object');

  const streamed = await exchange(ollamaUp, '/api/chat', { model: 'ol', messages: weather, tools: TOOLS, format: 'json' });
  t.equal(streamed.status, 200, streamed.text);
  t.equal(streamed.seen?.body['format'], 'json', 'format "json" as it is');
  const lines = ndjsonLines(streamed.text) as OllamaChat[];
  const calls = lines.flatMap((l) => l.message?.tool_calls ?? []);
  t.equal(calls.length, 1, 'streamed: one tool call');
  t.same(calls[0]?.function.arguments, CALL_ARGUMENTS);
  t.ok(lines.at(-1)?.done, 'streamed: ends with done');
});

t.test('across flavours: /api/chat to an OpenAI upstream and /v1/chat/completions to an Ollama upstream', async (t) => {
  const api = await exchange(openaiUp, '/api/chat', { model: 'oa', messages: weather, tools: TOOLS, format: SCHEMA, stream: false });
  t.equal(api.status, 200, api.text);
  t.same(api.seen?.body['tools'], TOOLS, 'OpenAI upstream: the tools');
  t.match(
    api.seen?.body['response_format'],
    { type: 'json_schema', json_schema: { schema: SCHEMA } },
    'OpenAI upstream: the format as a json_schema response_format',
  );
  t.same((api.seen?.body['response_format'] as { json_schema: { schema: unknown } }).json_schema.schema, SCHEMA);
  const apiCall = (JSON.parse(api.text) as OllamaChat).message.tool_calls?.[0];
  t.equal(apiCall?.function.name, 'get_weather', "/api/chat: the OpenAI upstream's call");
  t.same(apiCall?.function.arguments, CALL_ARGUMENTS, '/api/chat: its arguments parsed into an object');

  const rf = { type: 'json_schema', json_schema: { name: 'reply', schema: SCHEMA } };
  const v1 = await exchange(ollamaUp, '/v1/chat/completions', { model: 'ol', messages: weather, tools: TOOLS, response_format: rf });
  t.equal(v1.status, 200, v1.text);
  t.same(v1.seen?.body['tools'], TOOLS, 'Ollama upstream: the tools');
  t.same(v1.seen?.body['format'], SCHEMA, 'Ollama upstream: the schema as format');
  const v1Body = JSON.parse(v1.text) as Completion;
  t.equal(v1Body.choices[0]?.finish_reason, 'tool_calls');
  const v1Call = v1Body.choices[0]?.message.tool_calls?.[0];
  t.match(v1Call, { id: /^call_/, type: 'function', function: { name: 'get_weather' } }, "/v1: the Ollama upstream's call, with an id");
  t.same(JSON.parse(v1Call?.function.arguments ?? 'null'), CALL_ARGUMENTS, '/v1: its arguments as a JSON string');

  const forced = await post('/v1/chat/completions', { model: 'ol', messages: weather, tools: TOOLS, tool_choice: 'required' });
  t.equal(forced.status, 400, 'a forced tool choice cannot be said to an Ollama upstream');
  t.match(await forced.json(), { error: { message: /Ollama-flavoured upstream/, param: 'tool_choice' } });
});

t.test("key_env: the variable's key is the bearer LIA sends, never the client's key", async (t) => {
  const res = await exchange(openaiUp, '/v1/chat/completions', { model: 'oa', messages: hi });
  t.equal(res.status, 200, res.text);
  const all = [...openaiUp.listings, ...openaiUp.requests];
  t.ok(openaiUp.listings.length > 0 && openaiUp.chats().length > 0, 'health checks and chats reached the upstream');
  t.same([...new Set(all.map((s) => s.headers.authorization))], [`Bearer ${UPSTREAM_KEY}`], 'every request to it carried the key from the variable');
  t.notOk(
    [...all, ...ollamaUp.listings, ...ollamaUp.requests].some((s) => JSON.stringify(s.headers).includes(front.key)),
    "the client's key never reaches an upstream",
  );
  t.same(
    [...new Set([...ollamaUp.listings, ...ollamaUp.requests].map((s) => s.headers.authorization))],
    [undefined],
    'an upstream without a key gets no Authorization',
  );
});

t.test('a key_env variable that is not set, or a key_file that is missing, stops the start with exit 2 naming it', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-upstream-keys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const MISSING = 'LIA_TEST_UPSTREAM_KEY_NOT_SET';
  delete process.env[MISSING];
  /** Runs `lia serve` in this process with one upstream; returns the exit code and stderr. */
  const serve = async (upstream: Record<string, unknown>): Promise<{ code: number; err: string }> => {
    const file = path.join(dir, 'lia.config.yaml');
    const config = {
      logLevel: 'silent',
      plugins: {
        ...FRONT_UNUSED,
        'backend-upstream': { options: { upstreams: [{ name: 'vault', url: 'http://127.0.0.1:9', flavour: 'openai', models: ['m'], ...upstream }] } },
      },
    };
    await writeFile(file, JSON.stringify(config, null, 2)); // JSON is YAML
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let err = '';
    stdout.resume();
    stderr.on('data', (c: Buffer) => (err += c.toString()));
    const argv = ['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', path.join(dir, 'data')];
    const code = await main(argv, { stdout, stderr, env: { ...process.env, LIA_CONFIG: file, LIA_LOG_LEVEL: 'silent' } });
    return { code, err };
  };

  const unset = await serve({ key_env: MISSING });
  t.equal(unset.code, 2, `exit 2 (stderr: ${unset.err})`);
  t.match(
    unset.err,
    /upstream "vault": the environment variable LIA_TEST_UPSTREAM_KEY_NOT_SET \(key_env\) is empty or unset/,
    'names the upstream and the variable',
  );
  t.notMatch(unset.err, /\n\s+at /, 'no stack trace');

  process.env[MISSING] = '  \n';
  t.teardown(() => void delete process.env[MISSING]);
  const blank = await serve({ key_env: MISSING });
  t.equal(blank.code, 2, 'a blank variable too');
  t.match(blank.err, /LIA_TEST_UPSTREAM_KEY_NOT_SET \(key_env\) is empty or unset/);

  const noFile = await serve({ key_file: path.join(dir, 'no-such.key') });
  t.equal(noFile.code, 2, `a key_file that cannot be read: exit 2 (stderr: ${noFile.err})`);
  t.match(noFile.err, /upstream "vault": .*key_file.*no-such\.key/, 'names the upstream and the file');
  t.notMatch(noFile.err, /\n\s+at /, 'no stack trace');
});

t.test('a client that goes away mid-stream cancels the upstream request', async (t) => {
  for (const [surface, model, up] of [
    ['/v1/chat/completions', 'oa', openaiUp],
    ['/api/chat', 'ol', ollamaUp],
  ] as const) {
    const ctl = new AbortController();
    const res = await post(surface, { model, messages: [{ role: 'user', content: 'hang' }], stream: true }, { signal: ctl.signal });
    t.equal(res.status, 200, `${surface}: the stream started`);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('held')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    t.match(text, /held/, `${surface}: the first words arrived`);
    const seen = up.chats().at(-1);
    t.equal(seen?.body['stream'], true, `${surface}: the upstream request streams`);
    t.equal(seen?.aborted, false, `${surface}: the upstream request is open while the client reads`);
    ctl.abort();
    await waitFor(`the upstream to see its request for ${surface} closed`, () => seen?.aborted);
    t.pass(`${surface}: the upstream request was cancelled`);
  }
  const after = await post('/v1/chat/completions', { model: 'oa', messages: hi });
  t.equal(after.status, 200, 'the remote model still answers');
  t.equal(((await after.json()) as Completion).choices[0]?.message.content, 'from wire-openai');
});
