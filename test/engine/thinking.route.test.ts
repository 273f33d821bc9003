/**
 * Thinking: the engine's split of a model's output on `<think>…</think>` (unit cases, tags cut
 * across tokens), then end to end through the fake backend of `lia/testing`, whose model echoes
 * the prompt: a model created with a template that has a thinking section
 * (test/fixtures/templates/chatml-thinking.gotmpl) gets the `thinking` capability, `think`
 * returns the reasoning apart on `/api/chat` and `/api/generate` (streamed: thinking chunks, then
 * content chunks), in `reasoning_content` on `/v1/chat/completions` and as a `reasoning` item on
 * `/v1/responses`, as a thinking block on `/v1/messages`; a model without the capability answers
 * Ollama's 400.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from 'lia/testing';
import { ThinkingSplitter } from '../../plugins/engine/thinking.js';
import { ROOT } from '../helpers/fixtures.js';
import { ndjson } from './helpers.js';

const split = (chunks: string[]) => {
  const s = new ThinkingSplitter();
  const out = { thinking: '', content: '' };
  for (const c of [...chunks.map((x) => s.push(x)), s.flush()]) {
    out.thinking += c.thinking;
    out.content += c.content;
  }
  return out;
};

t.test('the splitter', async (t) => {
  t.same(split(['<think>', ' why', ' not', ' </think>', ' because']), { thinking: 'why not', content: 'because' });
  t.same(split(['\n<th', 'ink>a</t', 'hink', '>\n\nb c']), { thinking: 'a', content: 'b c' }, 'tags cut across chunks');
  t.same(split(['no ', 'tags <think>x</think>']), { thinking: '', content: 'no tags <think>x</think>' }, 'not opened first: all answer');
  t.same(split(['<think> still going ']), { thinking: 'still going', content: '' }, 'never closed: all thinking');
  t.same(split(['<thi']), { thinking: '', content: '<thi' }, 'a partial tag at the end is answer');
  t.same(split(['<think>a < b</think>ok']), { thinking: 'a < b', content: 'ok' });
});

const app = await startTestAppliance({
  listen: false,
  plugins: { 'backend-llama-cpp': false, 'backend-transformers': false, 'host-gpu': false, 'host-services': false, webui: false, 'fake-backend': FAKE_BACKEND },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', '<think>');
const template = readFileSync(path.join(ROOT, 'test/fixtures/templates/chatml-thinking.gotmpl'), 'utf8');
const created = await app.fetch('/api/create', { method: 'POST', body: JSON.stringify({ model: 'thinker', from: 'parrot', template, stream: false }) });
t.equal(created.status, 200, 'a model with a thinking template is created');
const post = async (path: string, body: unknown) => app.fetch(path, { method: 'POST', body: JSON.stringify(body) });
/** The JSON body of an answer, loosely typed: its fields are checked one by one. */
const json = async (res: Promise<{ json(): Promise<unknown> }>): Promise<any> => (await res).json();
const prompt = 'pondering deeply </think> the answer';

t.test('the capability comes from the template', async (t) => {
  const caps = async (model: string) => ((await json(post('/api/show', { model }))) as { capabilities: string[] }).capabilities;
  t.ok((await caps('thinker')).includes('thinking'));
  t.notOk((await caps('parrot')).includes('thinking'));
});

t.test('/api/chat and /api/generate with think', async (t) => {
  const chat = await json(post('/api/chat', { model: 'thinker', think: true, stream: false, messages: [{ role: 'user', content: prompt }] }));
  t.match(chat, { message: { role: 'assistant', thinking: 'pondering deeply', content: 'the answer' }, done: true });
  const gen = await json(post('/api/generate', { model: 'thinker', think: 'high', stream: false, prompt }));
  t.match(gen, { thinking: 'pondering deeply', response: 'the answer', done: true });

  const lines = await ndjson(await post('/api/chat', { model: 'thinker', think: true, messages: [{ role: 'user', content: prompt }] }));
  const kinds = lines.slice(0, -1).map((l) => ((l['message'] as { thinking?: string }).thinking ? 'thinking' : 'content'));
  t.same(kinds, ['thinking', 'thinking', 'content', 'content'], 'streamed: thinking chunks, then content chunks');
  t.equal(lines.map((l) => (l['message'] as { thinking?: string }).thinking ?? '').join(''), 'pondering deeply');
  t.equal(lines.map((l) => (l['message'] as { content: string }).content).join(''), 'the answer');
  const streamedGen = await ndjson(await post('/api/generate', { model: 'thinker', think: true, prompt }));
  t.equal(streamedGen.map((l) => (l['thinking'] as string | undefined) ?? '').join(''), 'pondering deeply');

  const whole = await json(post('/api/chat', { model: 'thinker', stream: false, messages: [{ role: 'user', content: prompt }] }));
  t.match(whole, { message: { content: '<think> pondering deeply </think> the answer' } }, 'without think: the output as it is');
  t.notOk('thinking' in whole.message);
});

t.test('a model without the capability: 400 for think, fine without', async (t) => {
  for (const path of ['/api/chat', '/api/generate']) {
    const res = await post(path, { model: 'parrot', think: true, prompt: 'x', messages: [{ role: 'user', content: 'x' }] });
    t.equal(res.status, 400, path);
    t.same(await res.json(), { error: '"parrot" does not support thinking' });
    t.equal((await post(path, { model: 'parrot', think: false, stream: false, prompt: 'x', messages: [{ role: 'user', content: 'x' }] })).status, 200);
  }
});

t.test('/v1/chat/completions: reasoning_content', async (t) => {
  const messages = [{ role: 'user', content: prompt }];
  const r = await json(post('/v1/chat/completions', { model: 'thinker', messages }));
  t.match(r.choices[0].message, { content: 'the answer', reasoning_content: 'pondering deeply' });
  const none = await json(post('/v1/chat/completions', { model: 'thinker', messages, reasoning_effort: 'none' }));
  t.equal(none.choices[0].message.content, '<think> pondering deeply </think> the answer', 'reasoning_effort none: left in content');
  const plain = await json(post('/v1/chat/completions', { model: 'parrot', messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high' }));
  t.equal(plain.choices[0].message.content, '<think> x', 'a model without the capability is not refused');
  const sse = await (await post('/v1/chat/completions', { model: 'thinker', messages, stream: true })).text();
  const deltas = sse
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta ?? {});
  t.equal(deltas.map((d) => d.reasoning_content ?? '').join(''), 'pondering deeply');
  t.equal(deltas.map((d) => d.content ?? '').join(''), 'the answer');
});

t.test('/v1/responses: a reasoning item before the message', async (t) => {
  const r = await json(post('/v1/responses', { model: 'thinker', input: prompt }));
  t.match(r.output, [
    { type: 'reasoning', id: /^rs_/, status: 'completed', summary: [], content: [{ type: 'reasoning_text', text: 'pondering deeply' }] },
    { type: 'message', content: [{ type: 'output_text', text: 'the answer' }] },
  ]);
  t.equal(r.output.length, 2);
  const none = await json(post('/v1/responses', { model: 'thinker', input: prompt, reasoning: { effort: 'none' } }));
  t.match(none.output, [{ type: 'message', content: [{ text: '<think> pondering deeply </think> the answer' }] }], 'effort none: one message');

  const sse = await (await post('/v1/responses', { model: 'thinker', input: prompt, stream: true })).text();
  const events = sse
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)) as { type: string; delta?: string });
  const types = events.map((e) => e.type);
  t.same(types.slice(0, 3), ['response.created', 'response.in_progress', 'response.output_item.added']);
  const done = types.indexOf('response.reasoning_text.done');
  t.ok(done > 0 && done < types.indexOf('response.output_text.delta'), 'the reasoning is closed before the text starts');
  t.equal(
    events
      .filter((e) => e.type === 'response.reasoning_text.delta')
      .map((e) => e.delta)
      .join(''),
    'pondering deeply',
  );
  t.equal(
    events
      .filter((e) => e.type === 'response.output_text.delta')
      .map((e) => e.delta)
      .join(''),
    'the answer',
  );
  t.equal(types.at(-1), 'response.completed');
});

t.test('/v1/messages: a thinking block when thinking is enabled', async (t) => {
  const body = { model: 'thinker', max_tokens: 50, messages: [{ role: 'user', content: prompt }] };
  const m = await json(post('/v1/messages', { ...body, thinking: { type: 'enabled', budget_tokens: 1024 } }));
  t.same(m.content, [
    { type: 'thinking', thinking: 'pondering deeply', signature: '' },
    { type: 'text', text: 'the answer' },
  ]);
  const off = await json(post('/v1/messages', body));
  t.same(off.content, [{ type: 'text', text: '<think> pondering deeply </think> the answer' }], 'not enabled: the text as it is');

  const sse = await (await post('/v1/messages', { ...body, stream: true, thinking: { type: 'enabled', budget_tokens: 1024 } })).text();
  const events = sse
    .split('\n')
    .filter((l) => l.startsWith('data: {'))
    .map((l) => JSON.parse(l.slice(6)) as { type: string; index?: number; delta?: Record<string, string>; content_block?: { type: string } });
  const starts = events.filter((e) => e.type === 'content_block_start').map((e) => [e.index, e.content_block?.type]);
  t.same(starts, [
    [0, 'thinking'],
    [1, 'text'],
  ]);
  t.equal(
    events
      .filter((e) => e.delta?.['type'] === 'thinking_delta')
      .map((e) => e.delta?.['thinking'])
      .join(''),
    'pondering deeply',
  );
  t.ok(
    events.some((e) => e.delta?.['type'] === 'signature_delta' && e.index === 0),
    'the thinking block is signed (empty) before it stops',
  );
  t.equal(
    events
      .filter((e) => e.delta?.['type'] === 'text_delta')
      .map((e) => e.delta?.['text'])
      .join(''),
    'the answer',
  );
});
