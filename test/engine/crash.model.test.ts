/**
 * Crash isolation on node-llama-cpp: each model runs in its own runner process. tinystories-656k makes llama.cpp
 * abort the whole process on a tab or a non-ASCII character (see the models README), and `kill -9`
 * is the other crash. The requests in flight get a clear error (a 500 JSON body before streaming,
 * an `{"error"}` line after), every other model and route keeps answering, and the next request
 * to the crashed model loads it again.
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import type { LlamaCppBackend } from '../../plugins/backend-llama-cpp/backend.js';
import { allowedCpus, chooseCpus } from '../../plugins/backend-llama-cpp/placement.js';
import { inferenceThreads } from '../../plugins/engine/threads.js';
import { ON_LLAMA_CPP } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

// CPU affinity is off by default; on here, to check the binding of the runners (first test).
const app = await startEngineAppliance({ plugins: { 'backend-llama-cpp': { options: { cpuAffinity: 'auto' } } }, env: ON_LLAMA_CPP });
t.teardown(() => app.close());
await createModel(app, 'crashy', 'gguf/tinystories-656k-q8_0.gguf');
await createModel(app, 'stories', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);
const backend = app.hooks.extensions
  .get('backends')
  .list()
  .find((b) => b.name === 'llama-cpp') as LlamaCppBackend;
const pidOf = (model: string) => backend.processes().find((p) => p.model === `${model}:latest`)?.pid;
const post = (path: string, body: unknown) => app.fetch(path, { method: 'POST', body: JSON.stringify(body) });

t.test('the first runner is bound to CPUs of its own; one that finds none free is not', async (t) => {
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 2 } });
  await ollama.generate({ model: 'crashy', prompt: 'Hi', options: { num_predict: 2 } });
  const allowed = allowedCpus();
  t.ok(allowed.length >= 1, 'this process knows its CPUs');
  const cpusOf = async (model: string) => allowedCpus(await readFile(`/proc/${pidOf(model)}/status`, 'utf8'));
  const expected = chooseCpus(allowed, new Set(), inferenceThreads(0));
  if (expected) {
    t.same(await cpusOf('stories'), expected, `bound to ${expected.join(',')}, the last CPUs but never the first`);
    t.notOk(expected.includes(allowed[0]!), 'the first CPU stays free for the API');
  } else {
    t.same(await cpusOf('stories'), allowed, 'no more CPUs than inference threads: unbound');
  }
  t.same(await cpusOf('crashy'), allowed, 'the second runner found no CPUs free and runs unbound');
});

t.test('a llama.cpp abort fails only the requests on that model, with a clear 500', async (t) => {
  await ollama.generate({ model: 'stories', prompt: 'Hi', options: { num_predict: 2 } });
  const ok = await ollama.generate({ model: 'crashy', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(ok.done, true, 'the crash model works with plain ASCII');
  const before = pidOf('crashy');
  t.ok(before, 'it runs in a runner process');

  const res = await post('/api/generate', { model: 'crashy', prompt: 'Once upon a\ttime', stream: false });
  t.equal(res.status, 500, 'generate');
  t.match(res.headers.get('content-type'), /application\/json/);
  t.match(await res.json(), { error: /runner stopped \(signal SIGABRT\)/ });
  // Streaming is the default; the crash comes before the first token, so it is still a 500 JSON body.
  const chat = await post('/api/chat', { model: 'crashy', messages: [{ role: 'user', content: 'Il était une fois' }] });
  t.equal(chat.status, 500, 'chat, streaming');
  t.match(chat.headers.get('content-type'), /application\/json/);
  t.match(await chat.json(), { error: /runner stopped \(signal SIGABRT\)/ });

  const other = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(other.done, true, 'another model keeps answering');
  t.equal((await app.fetch('/health', { auth: false })).status, 200, 'the appliance is healthy');
  t.ok(
    (await ollama.ps()).models.some((m) => m.name === 'stories:latest'),
    'the other model stayed loaded',
  );
  t.notOk(
    (await ollama.ps()).models.some((m) => m.name === 'crashy:latest'),
    'the crashed model is forgotten',
  );

  const again = await ollama.generate({ model: 'crashy', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(again.done, true, 'the next request loads it again');
  t.not(pidOf('crashy'), before, 'in a new runner');
});

t.test('kill -9 of a runner mid-stream ends the stream with an error line', async (t) => {
  await ollama.generate({ model: 'stories', prompt: '', keep_alive: -1 });
  const pid = pidOf('stories') as number;
  t.ok(pid);
  const res = await post('/api/generate', { model: 'stories', prompt: 'Once upon a time', options: { num_predict: 1900, temperature: 1 } });
  t.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = decoder.decode((await reader.read()).value);
  process.kill(pid, 'SIGKILL');
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value);
  const lines = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(lines[0], { done: false }, 'output had started');
  t.match(lines.at(-1), { error: /runner stopped \(signal SIGKILL\)/ }, 'the last line is the error');
  t.notOk(
    lines.some((l) => l['done'] === true),
    'no done object after a failure',
  );

  const crashy = await ollama.generate({ model: 'crashy', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(crashy.done, true, 'the other model keeps answering');
  const back = await ollama.generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(back.done, true, 'the killed model is loaded again');
  t.not(pidOf('stories'), pid);
});
