/**
 * `/api/generate` end to end: real stories260K GGUF created through the store, the official
 * `ollama` client over HTTPS with the appliance's CA and key. What a user sees: streamed and
 * single-object answers, measured metrics, raw mode, templates, stop words, seeds, JSON output,
 * load/unload with an empty prompt, and clear 4xx answers for bad input.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ndjson, ollamaClient, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance();
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);

t.test('stream: false gives one object with measured metrics', async (t) => {
  const r = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 24 } });
  const text = r.response ?? '';
  t.equal(r.model, 'stories');
  t.equal(r.done, true);
  t.equal(r.done_reason, 'length');
  t.ok(text.length > 10, `real text: ${JSON.stringify(text)}`);
  t.equal(r.eval_count, 24);
  t.ok(r.prompt_eval_count >= 4, 'prompt tokens counted');
  for (const key of ['total_duration', 'prompt_eval_duration', 'eval_duration'] as const) {
    t.ok(Number.isInteger(r[key]) && r[key] > 0, `${key} is a positive integer of nanoseconds`);
  }
  t.ok(r.total_duration >= r.eval_duration + r.prompt_eval_duration, 'total covers prompt and decode');
  t.ok(r.total_duration < 120e9, 'nanoseconds, not something bigger');
  t.match(r.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
});

t.test('streaming is the default: NDJSON chunks, then a done object with metrics', async (t) => {
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 12 } }),
  });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /application\/x-ndjson/);
  const lines = await ndjson(res);
  const last = lines.at(-1) as Record<string, unknown>;
  t.ok(lines.length >= 3, 'several chunks');
  for (const l of lines.slice(0, -1)) t.match(l, { model: 'stories', done: false, response: String });
  t.match(last, { done: true, done_reason: 'length', response: '', eval_count: 12, prompt_eval_count: Number });
  t.notOk('eval_count' in (lines[0] as object), 'no metrics on intermediate chunks');

  let text = '';
  let done = false;
  for await (const part of await ollama.generate({ model: 'stories', prompt: 'Once upon a time', stream: true, options: { num_predict: 8 } })) {
    text += part.response;
    done = part.done;
  }
  t.ok(done && text.length > 0, 'the ollama client reads the stream');
});

t.test('seed + temperature 0 are deterministic; stop words end the answer without the stop text', async (t) => {
  const ask = () => ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 30, temperature: 0, seed: 7 } });
  const a = await ask();
  const b = await ask();
  const answer = a.response ?? '';
  t.equal(answer, b.response);
  const word = answer.trim().split(/\s+/)[3] as string;
  const stopped = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 30, temperature: 0, seed: 7, stop: [word] } });
  t.equal(stopped.done_reason, 'stop');
  t.notMatch(stopped.response, word);
  t.equal(stopped.response, answer.slice(0, answer.indexOf(word)), 'the text before the stop word is the same');
});

t.test('raw, system and a request template shape the prompt', async (t) => {
  const base = { model: 'stories', options: { num_predict: 1, temperature: 0 } };
  const plain = await ollama.generate({ ...base, prompt: 'Once upon a time', raw: true });
  const upon = await ollama.generate({ ...base, prompt: 'Once upon', raw: true, options: { num_predict: 3, temperature: 0 } });
  t.match(upon.response, /^ \S/, `the first word keeps its leading space: ${JSON.stringify(upon.response)}`);
  const templated = await ollama.generate({ ...base, prompt: 'Once upon a time', template: 'Tell a story. {{ .Prompt }}' });
  t.ok(templated.prompt_eval_count > plain.prompt_eval_count, 'the template text was added');
  const withSystem = await ollama.generate({
    ...base,
    prompt: 'Once upon a time',
    system: 'A long system prompt here.',
    template: '{{ if .System }}{{ .System }} {{ end }}{{ .Prompt }}',
  });
  t.ok(withSystem.prompt_eval_count > plain.prompt_eval_count, 'the system prompt was rendered');
  const res = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ ...base, prompt: 'x', raw: true, template: '{{ .Prompt }}' }) });
  t.equal(res.status, 400);
  t.same(await res.json(), { error: 'raw mode does not support template, system, or context' });
});

t.test('context: the exchange as token ids, sent back with the next prompt to continue it', async (t) => {
  const first = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 8, temperature: 0 } });
  const context = first.context;
  t.ok(Array.isArray(context) && context.every((id) => Number.isInteger(id) && id >= 0), 'token ids');
  t.ok(context.length >= first.prompt_eval_count - 1 + 4, `the prompt (without BOS) and the answer: ${context.length} ids`);
  const next = await ollama.generate({ model: 'stories', prompt: 'Then', context, options: { num_predict: 4, temperature: 0 } });
  t.ok(next.prompt_eval_count > context.length, `the context was evaluated before the prompt: ${next.prompt_eval_count} tokens`);
  t.same(next.context.slice(0, context.length), context, 'and the new context continues the old one');

  const streamed = await ndjson(
    await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'stories', prompt: 'Hi', context, options: { num_predict: 2 } }) }),
  );
  t.ok(Array.isArray(streamed.at(-1)?.['context']), 'the last streamed object carries it too');
  t.notOk(
    streamed.slice(0, -1).some((l) => 'context' in l),
    'no chunk before it',
  );

  const post = (body: unknown) => app.fetch('/api/generate', { method: 'POST', body: JSON.stringify(body) });
  const unknown = await post({ model: 'stories', prompt: 'x', context: [1, 99999] });
  t.equal(unknown.status, 400);
  t.same(await unknown.json(), { error: 'context holds 99999, which is not a token of this model' });
  const raw = await post({ model: 'stories', prompt: 'x', raw: true, context });
  t.equal(raw.status, 400);
  t.same(await raw.json(), { error: 'raw mode does not support template, system, or context' });
  t.equal((await post({ model: 'stories', prompt: 'x', context: [-1] })).status, 400);
});

t.test('format: "json" and a JSON schema constrain the output', async (t) => {
  const schema = { type: 'object', properties: { happy: { type: 'boolean' } }, required: ['happy'] };
  const r = await ollama.generate({ model: 'stories', prompt: 'Is Lily happy?', format: schema, stream: false, options: { num_predict: 60 } });
  t.equal(r.done_reason, 'stop', 'the grammar completed');
  t.type(JSON.parse(r.response ?? '').happy, 'boolean');
  const j = await ollama.generate({ model: 'stories', prompt: 'JSON:', format: 'json', options: { num_predict: 400, temperature: 0 } });
  t.equal((j.response ?? '').trimStart()[0], '{', 'a JSON object starts');
  const bad = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'stories', prompt: 'x', format: 'yaml' }) });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: /invalid format/ });
});

t.test('an empty prompt loads the model; with keep_alive 0 it unloads it', async (t) => {
  const loaded = await ollama.generate({ model: 'stories', prompt: '' });
  t.match(loaded, { model: 'stories', response: '', done: true, done_reason: 'load' });
  t.equal((await ollama.ps()).models.length, 1);
  const unloaded = await ollama.generate({ model: 'stories', prompt: '', keep_alive: 0 });
  t.match(unloaded, { done: true, done_reason: 'unload' });
  t.same((await ollama.ps()).models, []);
});

t.test('bad requests are clear 4xx answers', async (t) => {
  const post = (body: unknown) => app.fetch('/api/generate', { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  const cases: [unknown, number, RegExp][] = [
    [{ model: 'nope', prompt: 'x' }, 404, /not found/],
    [{ prompt: 'x' }, 400, /model is required/],
    [{ model: 'stories', prompt: 'x', options: { stop: 'x' } }, 400, /option "stop" must be of type array/],
    [{ model: 'stories', prompt: 'x', options: { temperature: 'hot' } }, 400, /temperature/],
    [{ model: 'stories', prompt: 'x', keep_alive: '300' }, 400, /keep_alive/],
    [{ model: 'stories', prompt: 42 }, 400, /prompt/],
    [{ model: 'stories', prompt: 'x', stream: 'false' }, 400, /^"stream" must be a boolean$/],
    [{ model: 'stories', prompt: 'x', keep_alive: true }, 400, /^invalid keep_alive/],
    [{ model: 'stories', prompt: 'x', think: true }, 400, /does not support thinking/],
    [{ model: 'stories', prompt: 'x', images: ['aGk='] }, 400, /does not support vision/],
    ['{"model":', 400, /JSON/],
    ['', 400, /missing request body/],
  ];
  for (const [body, status, message] of cases) {
    const res = await post(body);
    t.equal(res.status, status, JSON.stringify(body));
    t.match(await res.json(), { error: message });
  }
  const unknownOption = await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 2, numa: true, mirostat: 1 } });
  t.equal(unknownOption.eval_count, 2, 'unknown option keys are ignored');
  const future = await post({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 2 }, a_future_field: { x: 1 }, context: null });
  t.equal(future.status, 200, 'unknown fields are accepted');
  t.match(await future.json(), { done: true, eval_count: 2 });
  const noKey = await app.fetch('/api/generate', { method: 'POST', auth: false, body: JSON.stringify({ model: 'stories', prompt: 'x' }) });
  t.equal(noKey.status, 401);
});
