/**
 * backend-llama-server end to end: llama.cpp's own llama-server (built by `lia engine build`) runs a
 * text GGUF that the `backends` configuration gives it, through the real HTTPS API and the official
 * ollama client; a server killed with SIGKILL is started again by the next request while the API
 * stays up; and the scheduler's slots, threads and keep-alive reach the process it starts.
 */
import { execFileSync } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import t from 'tap';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { SERVER_OVERHEAD_BYTES } from '../../plugins/backend-llama-server/backend.js';
import { readShape } from 'lia/gguf';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();

const app = await startEngineAppliance({
  env: {
    // GGUF on node-llama-cpp, but this one model on llama-server: a model's choice beats its format's.
    LIA_BACKENDS: 'gguf=llama-cpp,stories:latest=llama-server',
    LIA_NUM_PARALLEL: '2',
    LIA_THREADS: '1',
    LIA_CONTEXT_LENGTH: '256',
    LIA_LLAMA_SERVER_ARGS: '["--poll","0"]',
  },
});
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
await createModel(app, 'plain', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);
const backend = app.hooks.extensions
  .get('backends')
  .list()
  .find((b) => b.name === 'llama-server') as LlamaServerBackend;
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
  const socket = arg('--host')!;
  t.match(socket, /\/lia-sockets-\d+-\w+\/[0-9a-f]{12}\.sock$/, 'on a Unix socket, no TCP port');
  t.notOk(args.includes('--port'));
  t.equal((await stat(path.dirname(socket))).mode & 0o777, 0o700, "in a folder only the appliance's user may enter");
  t.ok((await stat(socket)).isSocket());
  if (process.getuid?.() === 0) {
    // Another local account (nobody) cannot even connect, so it cannot hold the server's threads.
    const script = `require('net').connect(${JSON.stringify(socket)}).on('connect', () => { console.log('connected'); process.exit(0) }).on('error', (e) => { console.log(e.code); process.exit(0) })`;
    // A bare environment: the test runner's NODE_OPTIONS hook would write where nobody may not.
    const out = execFileSync('setpriv', ['--reuid', 'nobody', '--regid', 'nogroup', '--clear-groups', '--', process.execPath, '-e', script], {
      encoding: 'utf8',
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin' },
    });
    t.equal(out.trim(), 'EACCES', 'a local user other than the appliance is refused at the socket');
  } else {
    t.comment('not root: the refusal of another local account is shown by the folder mode alone');
  }
  t.same(args.filter(Boolean).slice(-2), ['--poll', '0'], "the plugin's args come last");
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

t.test("its memory budget is read from the model's header: the cache of its slots, not a flat allowance", async (t) => {
  const model = await app.hooks.extensions.get('models').resolve('stories');
  const at = async (parallel: number, contextLength: number) => (await backend.estimateMemory(model, { parallel, contextLength, threads: 1 })).totalBytes;
  const shape = await readShape(model.modelPath);
  const perSequence = 2 * shape.layers * 256 * (shape.embedding / shape.heads) * shape.kvHeads * 2;
  t.equal((await at(4, 256)) - (await at(2, 256)), 2 * perSequence, 'two more slots: two more sequences of KV cache');
  t.ok((await at(2, 256)) < model.sizeBytes + SERVER_OVERHEAD_BYTES + 32 * 1024 * 1024, 'a tiny model is budgeted near its size');
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 1 } });
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string; size: number }> };
  t.equal(ps.models.find((m) => m.name === 'stories:latest')?.size, await at(2, 256), '/api/ps shows the budget of the loaded server');
});

t.test("a generation model's embedding server counts in its size from the first embedding on, not its shared weights", async (t) => {
  const model = await app.hooks.extensions.get('models').resolve('stories');
  const size = async () =>
    ((await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string; size: number }> }).models.find((m) => m.name === 'stories:latest')?.size;
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 1 } });
  const before = await size();
  await ollama.embed({ model: 'stories', input: 'Once upon a time' });
  const after = await size();
  const own = (await backend.estimateMemory(model, { parallel: 1, contextLength: 256, batchSize: 256, threads: 1 })).totalBytes - model.sizeBytes;
  t.equal(after! - before!, own, "its cache, buffers and process; the weights it maps are the first server's");
  await ollama.embed({ model: 'stories', input: 'again' });
  t.equal(await size(), after, 'counted once');
});

t.test('a prompt past the trained context: the same 400 as on node-llama-cpp', async (t) => {
  const tooLong = 'the cat sat on the mat. '.repeat(400);
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', prompt: tooLong, stream: false, options: { num_ctx: 2048 } }),
  });
  t.equal(res.status, 400);
  const { error } = (await res.json()) as { error: string };
  t.match(error, /^prompt is too long: (\d+) tokens > 2047 maximum \(the context length is 2048, the model's trained context length; shorten the prompt\)$/);
});

t.test('a conversation past the trained context grows the context, then loses its oldest turns; the system message and the newest stay', async (t) => {
  const system = { role: 'system', content: 'You tell short stories about animals.' };
  const turns = Array.from({ length: 400 }, (_, i) =>
    i % 2 === 0
      ? { role: 'user', content: `Tell me more about the cat number ${i}.` }
      : { role: 'assistant', content: 'The cat and the dog played in the park.' },
  );
  const last = { role: 'user', content: 'What happened next?' };
  const answer = await ollama.chat({ model: 'stories', messages: [system, ...turns, last], options: { num_predict: 4, temperature: 0 } });
  t.equal(answer.done, true, 'answered');
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string; context_length: number }> };
  const context = ps.models.find((m) => m.name === 'stories:latest')?.context_length ?? 0;
  t.equal(context, 2048, "grown to the model's trained context");
  t.ok(answer.prompt_eval_count < context && answer.prompt_eval_count > context / 2, `the newest turns that fit: ${answer.prompt_eval_count} tokens`);
  const alone = await ollama.chat({ model: 'stories', messages: [system, last], options: { num_predict: 1 } });
  t.ok(answer.prompt_eval_count > alone.prompt_eval_count, 'more than the system message and the last one');
});

t.test('args may not change what LIA sets for every server', async (t) => {
  await t.rejects(
    startEngineAppliance({ env: { LIA_LLAMA_SERVER_ARGS: '["--host","0.0.0.0"]' } }),
    /options\.args: --host is set by LIA for every server/,
    'a second --host would expose the server',
  );
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
