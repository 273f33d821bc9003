/**
 * `/api/chat` end to end with the official `ollama` client: the chat template stored in the GGUF
 * (stories260K-chatml), the store's template and system layers, the ChatML fallback, tools
 * (declared to the model; calls returned, never run; tool results accepted in the history),
 * structured output, history truncation to the context, the thinking capability from a store
 * template (and Ollama's 400 without it) and the load/unload forms.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';
import { engineDifference } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { ndjson, ollamaClient, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance();
t.teardown(() => app.close());
await createModel(app, 'chatml', 'gguf/stories260K-chatml.gguf');
const ollama = ollamaClient(app);
const hi = [{ role: 'user', content: 'Tell me a story about a cat.' }];

t.test('chat with the GGUF template, streamed and not', async (t) => {
  const r = await ollama.chat({ model: 'chatml', messages: hi, options: { num_predict: 16 } });
  t.match(r, { model: 'chatml', done: true, done_reason: 'length', message: { role: 'assistant', content: String } });
  t.ok(r.message.content.length > 0, `text: ${JSON.stringify(r.message.content)}`);
  t.equal(r.eval_count, 16);
  t.ok(r.total_duration > 0 && r.eval_duration > 0 && r.prompt_eval_duration > 0);

  const res = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify({ model: 'chatml', messages: hi, options: { num_predict: 6 } }) });
  const lines = await ndjson(res);
  t.ok(lines.length >= 2);
  for (const l of lines.slice(0, -1)) t.match(l, { done: false, message: { role: 'assistant', content: String } });
  t.match(lines.at(-1), { done: true, done_reason: 'length', message: { role: 'assistant', content: '' }, eval_count: 6 });

  // The ChatML template wraps the turn: more prompt tokens than the raw text alone.
  const raw = await ollama.generate({ model: 'chatml', prompt: hi[0]!.content, raw: true, options: { num_predict: 1 } });
  t.ok(r.prompt_eval_count > raw.prompt_eval_count + 5, `templated ${r.prompt_eval_count} vs raw ${raw.prompt_eval_count}`);
});

t.test('the store system layer is prepended unless the request brings its own', async (t) => {
  await createModel(app, 'teller', 'gguf/stories260K-chatml.gguf', { system: 'You are a teller of very short stories for children.' });
  const opts = { num_predict: 1, temperature: 0 };
  const plain = await ollama.chat({ model: 'chatml', messages: hi, options: opts });
  const withStored = await ollama.chat({ model: 'teller', messages: hi, options: opts });
  t.ok(withStored.prompt_eval_count > plain.prompt_eval_count, 'the stored system prompt was rendered');
  const own = await ollama.chat({ model: 'teller', messages: [{ role: 'system', content: 'Hi.' }, ...hi], options: opts });
  t.ok(own.prompt_eval_count < withStored.prompt_eval_count, 'a request system message replaces it');
});

t.test('a model without any template chats through ChatML; a store template layer is honoured', async (t) => {
  await createModel(app, 'bare', 'gguf/stories260K.gguf');
  const bare = await ollama.chat({ model: 'bare', messages: hi, options: { num_predict: 4 } });
  t.equal(bare.done, true);
  // Generate passes the prompt through, as Ollama's default template `{{ .Prompt }}` does.
  const generated = await ollama.generate({ model: 'bare', prompt: hi[0]!.content, system: 'Be brief.', options: { num_predict: 1 } });
  const raw = await ollama.generate({ model: 'bare', prompt: hi[0]!.content, raw: true, options: { num_predict: 1 } });
  t.equal(generated.prompt_eval_count, raw.prompt_eval_count, 'generate on a model without a template: the prompt as it is');
  await createModel(app, 'llama3ish', 'gguf/stories260K.gguf', {
    template:
      '{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n',
  });
  const l3 = await ollama.chat({ model: 'llama3ish', messages: hi, options: { num_predict: 4 } });
  t.equal(l3.done, true);
  t.not(l3.prompt_eval_count, bare.prompt_eval_count, 'a different template shapes the prompt differently');
  // The turn in Llama 3's format, sent raw, is the same prompt (up to a listed difference: node-llama-cpp's Llama 3 chat
  // wrapper spaces it its own way, two tokens more).
  const turn = `<|start_header_id|>user<|end_header_id|>\n\n${hi[0]!.content}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`;
  const asTurn = await ollama.generate({ model: 'llama3ish', prompt: turn, raw: true, options: { num_predict: 1 } });
  const spacing = engineDifference('A request `template` that is not the simple kind', { 'llama-cpp': 2, 'llama-server': 0 });
  t.equal(l3.prompt_eval_count, asTurn.prompt_eval_count + spacing, 'the prompt is the turn in the Llama 3 format');
});

t.test('tools are declared to the model; tool results are accepted in the history', async (t) => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'Get the weather of a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const opts = { num_predict: 8, temperature: 0 };
  const without = await ollama.chat({ model: 'chatml', messages: hi, options: opts });
  const withTools = await ollama.chat({ model: 'chatml', messages: hi, tools, options: opts });
  // node-llama-cpp documents the tool in the prompt in its own syntax; llama-server prompts with the model's template, which has no place for tools.
  const documented = engineDifference('Tools for a model whose chat template has none', { 'llama-cpp': true, 'llama-server': false });
  t.equal(
    withTools.prompt_eval_count > without.prompt_eval_count + 10,
    documented,
    documented ? 'the tool is documented in the prompt' : "the template has no tools: the prompt is the template's",
  );
  if (!documented) t.equal(withTools.prompt_eval_count, without.prompt_eval_count, 'the same prompt as without tools');
  t.equal(withTools.done, true);
  for (const call of withTools.message.tool_calls ?? []) t.match(call, { function: { name: 'get_weather', arguments: Object } });

  const followUp = await ollama.chat({
    model: 'chatml',
    tools,
    options: opts,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
      { role: 'tool', content: '{"temperature": 21}', tool_name: 'get_weather' },
    ],
  });
  t.equal(followUp.done, true, 'a history with a tool call and its result is answered');

  const both = await app.fetch('/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'chatml', messages: hi, tools, format: 'json', stream: false, options: { num_predict: 4 } }),
  });
  t.equal(both.status, 200, 'the answer is in the format (the request plan), on every engine');
  t.match(await both.json(), { done: true, message: { content: /^\s*\{/ } });
});

t.test('a conversation longer than the context loses its oldest turns; the system message and the newest stay', async (t) => {
  const system = { role: 'system', content: 'You tell short stories about animals.' };
  const turns = Array.from({ length: 120 }, (_, i) =>
    i % 2 === 0
      ? { role: 'user', content: 'Tell me more about the cat and the dog.' }
      : { role: 'assistant', content: 'The cat and the dog played in the park.' },
  );
  const last = { role: 'user', content: 'What happened next?' };
  // A 512-token context keeps every prompt here short: attention over the whole context is what
  // these requests cost. A loaded model is reloaded only to grow, so unload it first.
  const options = { num_predict: 8, temperature: 0, num_ctx: 512 };
  await ollama.chat({ model: 'chatml', messages: [], keep_alive: 0 });
  const chat = (messages: { role: string; content: string }[]) => ollama.chat({ model: 'chatml', messages, options });
  const newest = (k: number) => chat([system, ...turns.slice(-k), last]);
  const whole = await chat([system, ...turns, last]);
  // The ollama client's types lack ps's context_length (the server sends it).
  const loaded = (await ollama.ps()).models.find((m) => m.name === 'chatml:latest') as { context_length?: number } | undefined;
  const context = loaded?.context_length ?? 0;
  // Every engine first loads the model again with a larger context, up to the trained one (the request plan's context-fit.ts).
  const trained = ((await ollama.show({ model: 'chatml' })).model_info as unknown as Record<string, number>)['llama.context_length'];
  t.equal(context, trained, `grown to the trained context (${trained}) before turns are dropped`);
  t.ok(whole.prompt_eval_count < context, `the prompt fits: ${whole.prompt_eval_count} of ${context} tokens`);
  t.equal(whole.eval_count, 8, 'with room left to answer');
  // It is the prompt of the system message, the newest turns that fit, and the last message: the
  // fewest newest turns whose prompt is as long as the truncated one (a prompt only grows with k).
  let [lo, hi] = [1, turns.length];
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((await newest(mid)).prompt_eval_count < whole.prompt_eval_count) lo = mid + 1;
    else hi = mid;
  }
  const kept = lo;
  t.ok(kept > 1 && kept < turns.length, `${kept} of ${turns.length} turns kept`);
  const same = await newest(kept);
  t.equal(same.prompt_eval_count, whole.prompt_eval_count);
  t.equal(same.message.content, whole.message.content, 'the same answer (temperature 0)');
  t.ok((await newest(kept - 1)).prompt_eval_count < whole.prompt_eval_count, 'one turn fewer is a shorter prompt');
  t.equal((await newest(kept + 1)).prompt_eval_count, whole.prompt_eval_count, 'one more turn does not fit: it is dropped too');

  const res = await app.fetch('/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'chatml', messages: [system, { role: 'user', content: 'cat '.repeat(4 * context) }], options }),
  });
  t.equal(res.status, 400, 'a last message that cannot fit is a 400');
  t.match(await res.json(), { error: /context length/ });
});

t.test('format with a JSON schema gives parseable JSON', async (t) => {
  const schema = { type: 'object', properties: { name: { type: 'string', enum: ['Lily', 'Tom'] } }, required: ['name'] };
  const r = await ollama.chat({ model: 'chatml', messages: hi, format: schema, options: { num_predict: 40 } });
  t.equal(r.done_reason, 'stop');
  t.match(JSON.parse(r.message.content), { name: /^(Lily|Tom)$/ });
});

t.test('empty messages load; with keep_alive 0 they unload', async (t) => {
  t.match(await ollama.chat({ model: 'chatml', messages: [] }), { done: true, done_reason: 'load', message: { role: 'assistant', content: '' } });
  t.ok((await ollama.ps()).models.some((m) => m.name === 'chatml:latest'));
  t.match(await ollama.chat({ model: 'chatml', messages: [], keep_alive: 0 }), { done_reason: 'unload' });
  t.notOk((await ollama.ps()).models.some((m) => m.name === 'chatml:latest'));
});

t.test('a GGUF model whose template has a thinking section has the thinking capability', async (t) => {
  const template = readFileSync(path.join(ROOT, 'test/fixtures/templates/chatml-thinking.gotmpl'), 'utf8');
  await createModel(app, 'thinker', 'gguf/stories260K-chatml.gguf', { template });
  const show = (await (await app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'thinker' }) })).json()) as { capabilities: string[] };
  t.ok(show.capabilities.includes('thinking'));
  // The tiny model writes no <think> section, so its whole output is the answer.
  const r = await ollama.chat({ model: 'thinker', messages: hi, think: true, options: { num_predict: 6 } });
  t.match(r, { done: true, message: { role: 'assistant', content: String } });
  const refused = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify({ model: 'chatml', messages: hi, think: 'low' }) });
  t.equal(refused.status, 400, 'a model without it: 400');
  t.same(await refused.json(), { error: '"chatml" does not support thinking' });
});

t.test('bad chat requests are 4xx', async (t) => {
  const cases: [unknown, number, RegExp][] = [
    [{ model: 'chatml', messages: 'hi' }, 400, /messages/],
    [{ model: 'chatml', messages: [{ role: 'wizard', content: 'x' }] }, 400, /role/],
    [{ model: 'chatml', messages: [{ role: 'user', content: 5 }] }, 400, /content/],
    [{ model: 'chatml', messages: hi, tools: [{ type: 'function', function: {} }] }, 400, /tools/],
    [{ messages: hi }, 400, /model is required/],
    [{ model: 'ghost', messages: hi }, 404, /not found/],
  ];
  for (const [body, status, message] of cases) {
    const res = await app.fetch('/api/chat', { method: 'POST', body: JSON.stringify(body) });
    t.equal(res.status, status, JSON.stringify(body));
    t.match(await res.json(), { error: message });
  }
});
