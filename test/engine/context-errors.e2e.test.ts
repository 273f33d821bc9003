/**
 * A prompt longer than the context, on every surface, with a real model (stories260K, created
 * with `PARAMETER num_ctx 64`, and as it is, where the engine's default is capped at its trained
 * context): a 400 whose message names the prompt's length, the largest prompt the context takes
 * and what raises it (`num_ctx` / `LIA_CONTEXT_LENGTH` up to the trained context, or nothing past
 * it), in each surface's format: Ollama's `{"error"}`, OpenAI's error object with code
 * `context_length_exceeded`, Anthropic's `invalid_request_error` starting
 * `prompt is too long: N tokens > M maximum`.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance({ plugins: { 'api-openai': {} } });
t.teardown(() => app.close());
await createModel(app, 'short', 'gguf/stories260K-chatml.gguf', { parameters: { num_ctx: 64 } });
await createModel(app, 'whole', 'gguf/stories260K-chatml.gguf');
const long = 'the cat sat on the mat. '.repeat(40);
const post = async (path: string, body: unknown) => {
  const res = await app.fetch(path, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
};
/** The message for a 64-token context of a model trained for more. */
const SHORT = /^prompt is too long: (\d+) tokens > 63 maximum \(the context length is 64; raise it with num_ctx \(a request option or the model's PARAMETER\) or the engine's contextLength setting \(LIA_CONTEXT_LENGTH\), up to the model's trained context length of (\d+)\)$/;

t.test('Ollama: /api/generate and /api/chat', async (t) => {
  const gen = await post('/api/generate', { model: 'short', prompt: long, stream: false });
  t.equal(gen.status, 400);
  t.match(gen.body, { error: SHORT });
  const [, n, trained] = SHORT.exec(gen.body.error) ?? [];
  t.ok(Number(n) > 64 && Number(trained) > 64, `${n} tokens, trained ${trained}`);
  const chat = await post('/api/chat', { model: 'short', messages: [{ role: 'user', content: long }] });
  t.equal(chat.status, 400, 'a last message that cannot fit (streamed request: the error comes before the stream)');
  t.match(chat.body, { error: SHORT });
});

t.test("past the model's trained context, nothing raises it", async (t) => {
  const r = await post('/api/generate', { model: 'whole', prompt: long.repeat(8), stream: false });
  t.equal(r.status, 400);
  t.match(r.body, { error: /^prompt is too long: \d+ tokens > \d+ maximum \(the context length is \d+, the model's trained context length; shorten the prompt\)$/ });
});

t.test('OpenAI: /v1/chat/completions and /v1/responses', async (t) => {
  const chat = await post('/v1/chat/completions', { model: 'short', messages: [{ role: 'user', content: long }] });
  t.equal(chat.status, 400);
  t.match(chat.body, { error: { type: 'invalid_request_error', code: 'context_length_exceeded', message: SHORT } });
  const responses = await post('/v1/responses', { model: 'short', input: long });
  t.equal(responses.status, 400);
  t.match(responses.body, { error: { type: 'invalid_request_error', code: 'context_length_exceeded', message: SHORT } });
});

t.test('Anthropic: /v1/messages', async (t) => {
  const r = await post('/v1/messages', { model: 'short', max_tokens: 8, messages: [{ role: 'user', content: long }] });
  t.equal(r.status, 400);
  t.match(r.body, { type: 'error', error: { type: 'invalid_request_error', message: SHORT } });
});

// Last: the larger context stays loaded (the engine reloads only to grow), so prompts fit after it.
t.test('the num_ctx the message names makes the prompt fit', async (t) => {
  const fits = await post('/api/generate', { model: 'short', prompt: long, stream: false, options: { num_ctx: 512, num_predict: 1 } });
  t.equal(fits.status, 200);
  t.ok(fits.body.prompt_eval_count > 64);
});
