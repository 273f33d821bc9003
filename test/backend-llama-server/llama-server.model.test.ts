/**
 * backend-llama-server end to end: llama.cpp's own llama-server (built by `lia engine build`) runs a
 * text GGUF that the `backends` configuration gives it, through the real HTTPS API and the official
 * ollama client; a server killed with SIGKILL is started again by the next request while the API
 * stays up; and the scheduler's slots, threads and keep-alive reach the process it starts.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';

if (!(await cachedBinary())) {
  throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
}

const app = await startEngineAppliance({
  env: { LIA_BACKENDS: 'stories:latest=llama-server', LIA_NUM_PARALLEL: '2', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '256' },
});
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
await createModel(app, 'plain', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);
const backend = app.hooks.backends.list().find((b) => b.name === 'llama-server') as LlamaServerBackend;
const pidOf = (model: string) => backend.processes().find((p) => p.model === `${model}:latest`)?.pid;

t.test('a model the backends setting gives llama-server runs in a llama-server process', async (t) => {
  const answer = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 8, temperature: 0 } });
  t.equal(answer.done, true);
  t.ok((answer.response ?? '').length > 0, `it generated: ${JSON.stringify(answer.response)}`);
  t.ok(answer.prompt_eval_count > 0 && answer.eval_count > 0, 'with token counts');
  const pid = pidOf('stories');
  t.ok(pid, 'a llama-server process serves it');
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  t.ok(args[0]?.endsWith('llama-server'), `it is llama-server (${args[0]})`);
  const arg = (name: string) => args[args.indexOf(name) + 1];
  t.equal(arg('--parallel'), '2', "the engine's slots (numParallel)");
  t.equal(arg('--threads'), '1', "the engine's threads");
  t.equal(arg('--ctx-size'), '512', 'the context per slot times the slots');
  t.equal(arg('--host'), '127.0.0.1', 'on loopback only');
  t.notOk(
    args.some((a) => a.includes('API_KEY') || a === '--api-key'),
    'its key is not on the command line',
  );

  const chat = await ollama.chat({ model: 'stories', messages: [{ role: 'user', content: 'Hello' }], options: { num_predict: 4 } });
  t.equal(chat.done, true, 'chat works too');
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string; context_length: number }> };
  t.ok(
    ps.models.some((m) => m.name === 'stories:latest' && m.context_length === 256),
    '/api/ps lists it with its context per slot',
  );

  await ollama.generate({ model: 'plain', prompt: 'Hi', options: { num_predict: 2 } });
  t.notOk(pidOf('plain'), 'other models stay on node-llama-cpp');
});

t.test('a killed llama-server is started again by the next request; the API stays up', async (t) => {
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 2 } });
  const before = pidOf('stories');
  t.ok(before);
  process.kill(before!, 'SIGKILL');
  // The scheduler forgets the model once the process is gone.
  for (let i = 0; i < 100 && pidOf('stories') === before; i++) await new Promise((r) => setTimeout(r, 100));
  t.not(pidOf('stories'), before, 'the dead server is forgotten');
  const tags = await app.fetch('/api/tags');
  t.equal(tags.status, 200, 'the API answers meanwhile');
  await tags.arrayBuffer();
  const again = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(again.done, true, 'the next request loads it again');
  const after = pidOf('stories');
  t.ok(after && after !== before, `in a new process (${before} → ${after})`);
});

t.test('keep_alive 0 unloads it: the process ends', async (t) => {
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 2 } });
  const pid = pidOf('stories');
  t.ok(pid);
  await ollama.generate({ model: 'stories', prompt: '', keep_alive: 0 });
  for (let i = 0; i < 100 && pidOf('stories'); i++) await new Promise((r) => setTimeout(r, 100));
  t.notOk(pidOf('stories'), 'no longer listed');
  let alive = true;
  for (let i = 0; i < 100 && alive; i++) {
    try {
      process.kill(pid!, 0);
      await new Promise((r) => setTimeout(r, 100));
    } catch {
      alive = false;
    }
  }
  t.notOk(alive, 'the process is gone');
});
