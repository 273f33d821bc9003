/**
 * `backend-upstream`: replica choice and LIA's guarantees for a remote model, observed from
 * upstreams of the test's own (fake-upstream.ts). Two replicas of `pair`: while one holds a slow
 * request, the next ones go to the other. A key without the `inference` scope, or whose model
 * allow-list leaves the remote model out, gets a 403 and nothing reaches an upstream. An upstream
 * that stalls past its `timeout_ms` is a 504 in the surface's error shape (or, once a stream has
 * started, its last frame), and LIA closes the stalled request.
 */
import t from 'tap';
import { waitFor } from '../helpers/wait.js';
import { FakeUpstream, ndjsonLines, sseFrames, startFront } from './fake-upstream.js';

const TIMED_OUT = /upstream "stall" did not answer in time/;

const r1 = await new FakeUpstream('r1', 'openai').start();
const r2 = await new FakeUpstream('r2', 'openai').start();
const stall = await new FakeUpstream('stall', 'openai').start();
for (const up of [r1, r2, stall]) t.teardown(() => up.close());

const front = await startFront([
  { name: 'r1', url: r1.url, flavour: 'openai', models: ['pair'] },
  { name: 'r2', url: r2.url, flavour: 'openai', models: ['pair'] },
  { name: 'stall', url: stall.url, flavour: 'openai', timeout_ms: 500, models: ['stalled'] },
]);
// The upstreams go first: a request one still holds open would keep the front's close waiting.
t.teardown(async () => {
  await Promise.all([r1, r2, stall].map((up) => up.close()));
  await front.close();
});
const json = { 'content-type': 'application/json' };
const post = (p: string, body: unknown, key?: string) =>
  front.fetch(p, { method: 'POST', headers: key ? { ...json, authorization: `Bearer ${key}` } : json, body: JSON.stringify(body) });
const says = (content: string) => [{ role: 'user', content }];

type Completion = { choices: Array<{ message: { content: string } }> };
type OpenAIError = { error: { message: string; type: string; param: string | null; code: string | null } };

t.test('the replica with the fewest outstanding requests gets the next ones', async (t) => {
  const held = post('/v1/chat/completions', { model: 'pair', messages: says('hold') });
  const holder = await waitFor('a replica to hold the first request', () => [r1, r2].find((r) => r.held === 1));
  const other = holder === r1 ? r2 : r1;
  for (let i = 1; i <= 4; i++) {
    const res = await post('/v1/chat/completions', { model: 'pair', messages: says('hi') });
    t.equal(res.status, 200);
    const content = ((await res.json()) as Completion).choices[0]?.message.content;
    t.equal(content, `from ${other.name}`, `request ${i} went to ${other.name}, not to ${holder.name}, which holds one`);
  }
  const api = await post('/api/chat', { model: 'pair', messages: says('hi'), stream: false });
  t.equal(((await api.json()) as { message: { content: string } }).message.content, `from ${other.name}`, '/api/chat too');
  t.equal(holder.chats().length, 1, `${holder.name} got nothing but the held request`);

  holder.release();
  const answer = await held;
  t.equal(answer.status, 200);
  t.equal(((await answer.json()) as Completion).choices[0]?.message.content, `held by ${holder.name}`, 'the held request ends on its replica');
});

t.test("a key's scopes and model allow-list hold for a remote model", async (t) => {
  const create = async (body: object) => {
    const res = await front.fetch('/system/api-keys', { method: 'POST', headers: json, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`creating a key: ${res.status} ${await res.text()}`);
    return ((await res.json()) as { key: string }).key;
  };
  const reader = await create({ name: 'reader', scopes: ['models:read'] });
  const elsewhere = await create({ name: 'elsewhere', scopes: ['inference'], models: ['other-*'] });
  const allowed = await create({ name: 'pair-user', scopes: ['inference'], models: ['pai*'] });
  const reached = () => r1.chats().length + r2.chats().length;
  const before = reached();

  const tags = await front.fetch('/api/tags', { headers: { authorization: `Bearer ${reader}` } });
  t.ok(
    ((await tags.json()) as { models: Array<{ name: string }> }).models.some((m) => m.name === 'pair:latest'),
    'the reader sees the remote model listed',
  );

  const api = await post('/api/chat', { model: 'pair', messages: says('hi'), stream: false }, reader);
  t.equal(api.status, 403, '/api/chat without the inference scope');
  t.match(await api.json(), { error: /"inference"/ }, 'names the scope, in the Ollama shape');
  const v1 = await post('/v1/chat/completions', { model: 'pair', messages: says('hi') }, reader);
  t.equal(v1.status, 403, '/v1/chat/completions without the inference scope');
  t.match(await v1.json(), { error: { message: /"inference"/, type: 'permission_error' } }, 'in the OpenAI shape');

  const apiList = await post('/api/chat', { model: 'pair', messages: says('hi'), stream: false }, elsewhere);
  t.equal(apiList.status, 403, '/api/chat outside the allow-list');
  t.same(await apiList.json(), { error: 'this API key may not use the model "pair"' });
  const v1List = await post('/v1/chat/completions', { model: 'pair', messages: says('hi') }, elsewhere);
  t.equal(v1List.status, 403, '/v1/chat/completions outside the allow-list');
  t.match(await v1List.json(), { error: { message: /"pair"/, type: 'permission_error', param: 'model' } });
  t.equal(reached(), before, 'no refused request reached an upstream');

  const ok = await post('/api/chat', { model: 'pair', messages: says('hi'), stream: false }, allowed);
  t.equal(ok.status, 200, 'a key whose allow-list has it chats');
  t.match(await ok.json(), { message: { content: /^from r[12]$/ } });
  t.equal(reached(), before + 1);
});

t.test('timeout_ms turns a stalled upstream into a 504 in the surface’s error shape', async (t) => {
  // `stall`: no headers at all; `hang`: the first words, then nothing (a client waiting for the
  // whole answer has seen nothing either way).
  for (const cue of ['stall', 'hang']) {
    const api = await post('/api/chat', { model: 'stalled', messages: says(cue), stream: false });
    t.equal(api.status, 504, `/api/chat (${cue})`);
    const apiBody = (await api.json()) as { error: string };
    t.same(Object.keys(apiBody), ['error'], `/api/chat (${cue}): the Ollama shape`);
    t.match(apiBody.error, TIMED_OUT, `/api/chat (${cue}): names the upstream`);

    const v1 = await post('/v1/chat/completions', { model: 'stalled', messages: says(cue) });
    t.equal(v1.status, 504, `/v1/chat/completions (${cue})`);
    t.match(await v1.json(), { error: { message: TIMED_OUT, type: 'server_error', code: 'timeout' } }, `/v1/chat/completions (${cue}): the OpenAI shape`);
  }

  // A stream that has not started is still an error status.
  const v1Stall = await post('/v1/chat/completions', { model: 'stalled', messages: says('stall'), stream: true });
  t.equal(v1Stall.status, 504, '/v1/chat/completions, streamed, stalled before the first byte');
  t.match(await v1Stall.json(), { error: { message: TIMED_OUT, code: 'timeout' } });
  const apiStall = await post('/api/chat', { model: 'stalled', messages: says('stall') });
  t.equal(apiStall.status, 504, '/api/chat, streamed, stalled before the first byte');
  t.match(await apiStall.json(), { error: TIMED_OUT });

  // A stream that has started ends with an error frame in its surface's format, never hangs.
  const v1Hang = await post('/v1/chat/completions', { model: 'stalled', messages: says('hang'), stream: true });
  t.equal(v1Hang.status, 200, '/v1/chat/completions, streamed, stalled after the first words');
  const frames = sseFrames(await v1Hang.text()) as Array<{ choices?: Array<{ delta: { content?: string } }>; error?: OpenAIError['error'] }>;
  t.match(frames.map((f) => f.choices?.[0]?.delta.content ?? '').join(''), /held/, 'the first words came through');
  t.match(frames.at(-1), { error: { message: TIMED_OUT, type: 'server_error', code: 'timeout' } }, 'the last frame is an OpenAI error');
  const apiHang = await post('/api/chat', { model: 'stalled', messages: says('hang') });
  t.equal(apiHang.status, 200, '/api/chat, streamed, stalled after the first words');
  const lines = ndjsonLines(await apiHang.text()) as Array<{ message?: { content: string }; error?: string }>;
  t.match(lines[0], { message: { content: 'held ' } }, 'the first words came through');
  t.match(lines.at(-1), { error: TIMED_OUT }, 'the last line is an error');

  t.equal(stall.chats().length, 8, 'each request reached the stalled upstream once (no other replica to try)');
  await waitFor('the stalled upstream to see every request closed', () => stall.chats().every((r) => r.aborted));
  t.pass('LIA closed every stalled request');
});
