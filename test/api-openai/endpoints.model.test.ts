/**
 * `/v1/completions`, `/v1/embeddings`, `/v1/models` and the error envelope end to end, with the
 * official `openai` client (every body and chunk schema-validated).
 */
import t from 'tap';
import OpenAI from 'openai';
import { openaiFixture } from './openai-client.js';

// One model (one runner to load): the template-less stories260K, with a namespaced name.
const MODEL = 'tests/stories-raw';
const fx = await openaiFixture(
  t,
  { [MODEL]: 'gguf/stories260K.gguf' },
  {
    // The Responses API switched off: the rest of /v1 is served without it.
    'api-openai': { options: { aliases: { 'gpt-3.5-turbo-instruct': MODEL }, responses: false } },
  },
);
const { client, app } = fx;

t.test('completions: string prompt, default max_tokens 16', async (t) => {
  const res = await client.completions.create({ model: MODEL, prompt: 'Once upon a time', seed: 1 });
  t.match(res.id, /^cmpl-/);
  t.equal(res.object, 'text_completion');
  t.equal(res.choices.length, 1);
  t.ok(res.choices[0]!.text.length > 0);
  t.ok(res.usage!.completion_tokens <= 16 && res.usage!.completion_tokens > 0);
  if (res.usage!.completion_tokens === 16) t.equal(res.choices[0]!.finish_reason, 'length');
  await fx.conforms(t);
});

t.test('completions: prompt array, echo, stop', async (t) => {
  const res = await client.completions.create({
    model: MODEL,
    prompt: ['Once upon a time', 'The cat'],
    echo: true,
    max_tokens: 6,
    seed: 2,
  });
  t.equal(res.choices.length, 2);
  t.same(
    res.choices.map((c) => c.index),
    [0, 1],
  );
  t.ok(res.choices[0]!.text.startsWith('Once upon a time'), 'echo prepends the prompt');
  t.ok(res.choices[1]!.text.startsWith('The cat'));
  t.equal(res.usage!.total_tokens, res.usage!.prompt_tokens + res.usage!.completion_tokens);
  await fx.conforms(t);
});

t.test('completions: streamed', async (t) => {
  const stream = await client.completions.create({
    model: MODEL,
    prompt: 'Once upon a time',
    max_tokens: 8,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  t.ok(
    withChoices.slice(0, -1).every((c) => c.choices[0]!.finish_reason === null),
    'finish_reason null until the last',
  );
  t.equal(withChoices.at(-1)!.choices[0]!.finish_reason, 'length');
  t.equal(chunks.at(-1)!.usage!.completion_tokens, 8);
  t.ok(withChoices.map((c) => c.choices[0]!.text).join('').length > 0);
  await fx.conforms(t, chunks.length);
});

t.test('embeddings: the default base64 vectors equal the float ones', async (t) => {
  const input = ['Once upon a time', 'a cat sat on the mat'];
  const b64 = await client.embeddings.create({ model: MODEL, input });
  const floats = await client.embeddings.create({ model: MODEL, input, encoding_format: 'float' });
  t.equal(b64.object, 'list');
  t.equal(b64.data.length, 2);
  t.ok(b64.usage.prompt_tokens > 0);
  for (const i of [0, 1]) {
    const a = b64.data[i]!.embedding;
    const f = floats.data[i]!.embedding;
    t.equal(b64.data[i]!.index, i);
    t.equal(a.length, 64, 'stories260K has 64 dimensions');
    t.same(a, f.map(Math.fround), `vector ${i}: base64 decodes to the float vector (as float32)`);
  }
  const raw = await app.fetch('/v1/embeddings', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, input: 'x', encoding_format: 'base64' }),
  });
  const body = (await raw.json()) as { data: { embedding: unknown }[] };
  t.type(body.data[0]!.embedding, 'string', 'base64 on the wire');
  const short = await client.embeddings.create({ model: MODEL, input: 'x', dimensions: 16, encoding_format: 'float' });
  t.equal(short.data[0]!.embedding.length, 16, 'dimensions truncates');
  await fx.conforms(t, 3);
});

t.test('models: list and retrieve (ids with a slash)', async (t) => {
  const ids: string[] = [];
  for await (const m of client.models.list()) ids.push(m.id);
  const nested = ids.find((id) => id.startsWith(MODEL));
  t.ok(nested, `the namespaced model is listed: ${ids.join(', ')}`);
  const m = await client.models.retrieve(nested!);
  t.equal(m.id, nested);
  t.equal(m.object, 'model');
  await fx.conforms(t, 2);
});

t.test('errors: OpenAI envelope, statuses and client error classes', async (t) => {
  const messages = [{ role: 'user' as const, content: 'hi' }];
  const notFound = await client.chat.completions.create({ model: 'no-such-model', messages }).catch((e) => e);
  t.ok(notFound instanceof OpenAI.NotFoundError, '404 → NotFoundError');
  t.match(notFound, { status: 404, code: 'model_not_found', type: 'invalid_request_error', param: 'model' });

  const badN = await client.chat.completions.create({ model: MODEL, messages, n: 2 }).catch((e) => e);
  t.ok(badN instanceof OpenAI.BadRequestError, '400 → BadRequestError');
  t.match(badN, { status: 400, param: 'n', type: 'invalid_request_error' });

  const badRole = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'wizard', content: 'x' } as never] }).catch((e) => e);
  t.match(badRole, { status: 400, param: 'messages[0].role' });

  const badKey = await fx
    .clientWithKey('lia_wrong')
    .models.list()
    .catch((e) => e);
  t.ok(badKey instanceof OpenAI.AuthenticationError, '401 → AuthenticationError');
  t.match(badKey, { status: 401, code: 'invalid_api_key' });

  const emb = await client.embeddings.create({ model: 'nope', input: 'x' }).catch((e) => e);
  t.match(emb, { status: 404, code: 'model_not_found' });
  const cmp = await client.completions.create({ model: MODEL, prompt: [1, 2, 3] }).catch((e) => e);
  t.match(cmp, { status: 400, param: 'prompt' });

  const notJson = await app.fetch('/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":' });
  t.equal(notJson.status, 400);
  t.match(await notJson.json(), { error: { type: 'invalid_request_error', param: null, code: null } });
  const stringNumber = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages, temperature: '0.5', some_future_field: true }),
  });
  t.equal(stringNumber.status, 400, 'a number sent as a string is refused, not converted');
  t.same(await stringNumber.json(), {
    error: { message: '"temperature" must be a number', type: 'invalid_request_error', param: 'temperature', code: null },
  });
  await fx.conforms(t, 6);
});

t.test('aliases and paths as clients spell them', async (t) => {
  const res = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'Once', max_tokens: 2 });
  t.equal(res.model, `${MODEL}:latest`, 'an aliased name is served by its model, and the real name echoed');
  const doubled = await app.fetch('//v1//completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, prompt: 'Once', max_tokens: 2 }),
  });
  t.equal(doubled.status, 200, 'doubled slashes are normalised');
  t.equal(((await doubled.json()) as { object: string }).object, 'text_completion');
  await fx.conforms(t, 1);
});

t.test('responses: false leaves POST /v1/responses out, answered as an unknown path', async (t) => {
  const err = await client.responses.create({ model: MODEL, input: 'hi' }).catch((e) => e);
  t.ok(err instanceof OpenAI.NotFoundError, '404 → NotFoundError');
  t.match(err, { status: 404, type: 'invalid_request_error' });
  const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  t.equal(chat.object, 'chat.completion', 'the rest of /v1 is served');
});
