/**
 * `backend-upstream` discovery: a real appliance is the upstream, discovered twice, through its
 * `/v1/models` (OpenAI flavour, the names as it lists them) and its `/api/tags` (Ollama flavour,
 * under aliases). The front lists what the upstream lists and serves it; a model created on the
 * upstream appears after the refresh, and one deleted there disappears.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { startTestAppliance } from '../helpers/appliance.js';
import { waitFor } from '../helpers/wait.js';
import { FRONT_UNUSED, startFront } from './fake-upstream.js';
import { upstreamAccess } from '../helpers/upstream-access.js';

const json = { 'content-type': 'application/json' };

const up = await startTestAppliance({ plugins: { ...FRONT_UNUSED, 'fake-backend': FAKE_BACKEND } });
t.teardown(() => up.close());
await createFakeModel(up, 'first', 'first says:');

const access = await upstreamAccess(t, up);

const front = await startFront([
  { name: 'up-openai', url: up.url, flavour: 'openai', ...access, discover: true, refresh_ms: 1000 },
  {
    name: 'up-ollama',
    url: up.url,
    flavour: 'ollama',
    ...access,
    discover: true,
    refresh_ms: 1000,
    aliases: { 'first:latest': 'first-o', 'second:latest': 'second-o' },
  },
]);
t.teardown(() => front.close());

type Tag = { name: string; remote_host?: string; remote_model?: string; details: { format: string } };
const tags = async (): Promise<Tag[]> => ((await (await front.fetch('/api/tags')).json()) as { models: Tag[] }).models;
const names = async () => (await tags()).map((m) => m.name).sort();
const chat = async (model: string) => {
  const res = await front.fetch('/api/chat', {
    method: 'POST',
    headers: json,
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream: false }),
  });
  return { status: res.status, body: (await res.json()) as { message?: { content: string }; error?: string } };
};

t.test("the upstream's models are listed from its /v1/models and its /api/tags, and served", async (t) => {
  const listed = await tags();
  t.same(listed.map((m) => m.name).sort(), ['first-o:latest', 'first:latest'], 'what the upstream serves, nothing more');
  t.match(
    listed.find((m) => m.name === 'first:latest'),
    { remote_host: up.url, remote_model: 'first:latest', details: { format: 'upstream' } },
    'OpenAI flavour: under the name it lists',
  );
  t.match(
    listed.find((m) => m.name === 'first-o:latest'),
    { remote_host: up.url, remote_model: 'first:latest' },
    'Ollama flavour: under its alias',
  );

  const v1 = (await (await front.fetch('/v1/models')).json()) as { data: Array<{ id: string }> };
  t.same(v1.data.map((m) => m.id).sort(), ['first-o:latest', 'first:latest'], '/v1/models lists them too');

  for (const model of ['first', 'first-o']) {
    const answer = await chat(model);
    t.equal(answer.status, 200, `${model}: ${JSON.stringify(answer.body)}`);
    t.match(answer.body.message?.content, /^first says:/, `${model}: the upstream's model answers`);
  }
});

t.test('a model created on the upstream appears after the refresh; one deleted there disappears', async (t) => {
  await createFakeModel(up, 'second', 'second says:');
  const grown = await waitFor('the front to list the new model under both names', async () => {
    const now = await names();
    return now.includes('second:latest') && now.includes('second-o:latest') && now;
  });
  t.same(grown, ['first-o:latest', 'first:latest', 'second-o:latest', 'second:latest'], 'listed without a restart');
  for (const model of ['second', 'second-o']) {
    const answer = await chat(model);
    t.equal(answer.status, 200, `${model}: ${JSON.stringify(answer.body)}`);
    t.match(answer.body.message?.content, /^second says:/, `${model}: served`);
  }

  const deleted = await up.fetch('/api/delete', { method: 'DELETE', headers: json, body: JSON.stringify({ model: 'first' }) });
  t.equal(deleted.status, 200, 'deleted on the upstream');
  await deleted.arrayBuffer();
  const shrunk = await waitFor('the front to stop listing the deleted model', async () => {
    const now = await names();
    return !now.includes('first:latest') && !now.includes('first-o:latest') && now;
  });
  t.same(shrunk, ['second-o:latest', 'second:latest'], 'gone from the listing');
  const gone = await chat('first');
  t.equal(gone.status, 404, 'and no longer served');
});
