/**
 * Round 3 of the outside sweep on llama-server (docs/security.md): client input never produces a
 * 5xx (a lone UTF-16 surrogate in a prompt, a character a vocabulary without byte tokens lacks),
 * and a request sent just after the model's server was killed waits for the restart like the ones
 * after it.
 */
import t from 'tap';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { requireLlamaServer } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from '../engine/helpers.js';

requireLlamaServer();
const app = await startEngineAppliance({ env: { LIA_BACKENDS: 'gguf=llama-server' } });
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
await createModel(app, 'tiny', 'gguf/tinystories-656k-q8_0.gguf');
const servers = app.hooks.extensions
  .get('backends')
  .list()
  .find((b) => b.name === 'llama-server') as LlamaServerBackend;

const post = async (path: string, body: object) => {
  const res = await app.fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

t.test('a lone surrogate in a prompt is answered, not a 500', async (t) => {
  const generate = await post('/api/generate', { model: 'stories', prompt: '\ud800x\udfff', stream: false, options: { num_predict: 2 } });
  t.equal(generate.status, 200, JSON.stringify(generate.body));
  const chat = await post('/api/chat', { model: 'stories', stream: false, messages: [{ role: 'user', content: 'a \udc00 b' }], options: { num_predict: 2 } });
  t.equal(chat.status, 200, JSON.stringify(chat.body));
});

t.test("a character the model's vocabulary lacks is a 400 saying so; the model keeps answering", async (t) => {
  for (const prompt of ['100%', 'a\tb']) {
    const res = await post('/api/generate', { model: 'tiny', prompt, stream: false, options: { num_predict: 2 } });
    t.equal(res.status, 400, `${JSON.stringify(prompt)}: ${JSON.stringify(res.body)}`);
    t.match(res.body, { error: "the model cannot take this input (a character of the input is not in the model's vocabulary)" });
    const chat = await post('/api/chat', { model: 'tiny', stream: false, messages: [{ role: 'user', content: prompt }], options: { num_predict: 2 } });
    t.equal(chat.status, 400, `chat ${JSON.stringify(prompt)}: ${JSON.stringify(chat.body)}`);
  }
  const fine = await post('/api/generate', { model: 'tiny', prompt: 'Once upon a time', stream: false, options: { num_predict: 2 } });
  t.equal(fine.status, 200);
});

t.test('a request right after the idle server is killed waits for its restart', async (t) => {
  const warm = await post('/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 1 } });
  t.equal(warm.status, 200);
  for (let round = 0; round < 3; round++) {
    const pid = servers.processes().find((p) => p.model === 'stories:latest')?.pid;
    t.ok(pid, 'the model has a server');
    process.kill(pid!, 'SIGKILL');
    const res = await post('/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 1 } });
    t.equal(res.status, 200, `round ${round}: ${JSON.stringify(res.body)}`);
  }
});

t.test('a request already sent to a server that dies before answering is answered by the restarted one', async (t) => {
  const pid = servers.processes().find((p) => p.model === 'stories:latest')?.pid;
  t.ok(pid, 'the model has a server');
  // Frozen, the server still accepts the connection and takes the request, then is killed: the
  // connection is reset before any answer, as when a request races an engine's death.
  process.kill(pid!, 'SIGSTOP');
  const pending = post('/api/generate', { model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 1 } });
  await new Promise((r) => setTimeout(r, 500));
  process.kill(pid!, 'SIGKILL');
  const res = await pending;
  t.equal(res.status, 200, JSON.stringify(res.body));
  t.not(servers.processes().find((p) => p.model === 'stories:latest')?.pid, pid, 'a new server answered');
});
