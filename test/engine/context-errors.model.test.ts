/**
 * Prompts longer than the loaded context, with a real model (stories260K, trained for 2048 tokens):
 * created with `PARAMETER num_ctx 64`, a longer prompt grows the context (the model is loaded
 * again, larger) and is answered, on every surface; past the trained context nothing can grow it,
 * and the answer is a 400 naming the prompt's length, the largest prompt the context takes and
 * why, in each surface's format: Ollama's `{"error"}`, OpenAI's error object with code
 * `context_length_exceeded`, Anthropic's `invalid_request_error` starting
 * `prompt is too long: N tokens > M maximum`. (A larger context that would not fit the memory
 * budget is refused by the scheduler: test/engine/scheduler.test.ts.)
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance({ plugins: { 'api-openai': {} } });
t.teardown(() => app.close());
await createModel(app, 'short', 'gguf/stories260K-chatml.gguf', { parameters: { num_ctx: 64 } });
await createModel(app, 'whole', 'gguf/stories260K-chatml.gguf');
const long = 'the cat sat on the mat. '.repeat(40);
const tooLong = long.repeat(8);
const post = async (path: string, body: unknown) => {
  const res = await app.fetch(path, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
};
const loadedContext = async (name: string): Promise<number | undefined> => {
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; context_length: number }[] };
  return ps.models.find((m) => m.name === `${name}:latest`)?.context_length;
};
/** The message past the model's trained context. */
const TRAINED = /^prompt is too long: (\d+) tokens > (\d+) maximum \(the context length is (\d+), the model's trained context length; shorten the prompt\)$/;

t.test('a prompt longer than the loaded context grows it, on every surface', async (t) => {
  const gen = await post('/api/generate', { model: 'short', prompt: long, stream: false, options: { num_predict: 1 } });
  t.equal(gen.status, 200, JSON.stringify(gen.body));
  t.ok(gen.body.prompt_eval_count > 64, `a ${gen.body.prompt_eval_count}-token prompt answered by a model stored with num_ctx 64`);
  const grown = (await loadedContext('short')) ?? 0;
  t.ok(grown > gen.body.prompt_eval_count, `the model was loaded again with ${grown} tokens of context`);
  const chat = await post('/api/chat', { model: 'short', stream: false, messages: [{ role: 'user', content: long }], options: { num_predict: 1 } });
  t.equal(chat.status, 200);
  const openai = await post('/v1/chat/completions', { model: 'short', max_tokens: 1, messages: [{ role: 'user', content: long }] });
  t.equal(openai.status, 200);
  const responses = await post('/v1/responses', { model: 'short', max_output_tokens: 16, input: long });
  t.equal(responses.status, 200);
  const anthropic = await post('/v1/messages', { model: 'short', max_tokens: 1, messages: [{ role: 'user', content: long }] });
  t.equal(anthropic.status, 200);
});

t.test("past the model's trained context, nothing grows it: /api/generate and /api/chat", async (t) => {
  const gen = await post('/api/generate', { model: 'whole', prompt: tooLong, stream: false });
  t.equal(gen.status, 400);
  t.match(gen.body, { error: TRAINED });
  const [, n, max, ctx] = TRAINED.exec(gen.body.error) ?? [];
  t.ok(Number(n) > Number(ctx) && Number(max) === Number(ctx) - 1, `${n} tokens, context ${ctx}`);
  const chat = await post('/api/chat', { model: 'whole', messages: [{ role: 'user', content: tooLong }] });
  t.equal(chat.status, 400, 'a streamed request gets the error before the stream');
  t.match(chat.body, { error: TRAINED });
});

t.test('OpenAI: /v1/chat/completions and /v1/responses', async (t) => {
  const chat = await post('/v1/chat/completions', { model: 'whole', messages: [{ role: 'user', content: tooLong }] });
  t.equal(chat.status, 400);
  t.match(chat.body, { error: { type: 'invalid_request_error', code: 'context_length_exceeded', message: TRAINED } });
  const responses = await post('/v1/responses', { model: 'whole', input: tooLong });
  t.equal(responses.status, 400);
  t.match(responses.body, { error: { type: 'invalid_request_error', code: 'context_length_exceeded', message: TRAINED } });
});

t.test('Anthropic: /v1/messages', async (t) => {
  const r = await post('/v1/messages', { model: 'whole', max_tokens: 8, messages: [{ role: 'user', content: tooLong }] });
  t.equal(r.status, 400);
  t.match(r.body, { type: 'error', error: { type: 'invalid_request_error', message: TRAINED } });
});
