/**
 * Parallelism per model and the queue where people look (issue 43, item 4): `PARAMETER
 * num_parallel 3` gives one model three slots on an engine whose default is one (llama-server's
 * `-np`), and `/api/ps` says, per model, its slots, the requests running on them and those
 * waiting for one.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { startEngineAppliance } from './helpers.js';
import { llamaServerArgs, requireLlamaServer } from '../helpers/engines.js';
import type { TestAppliance } from '../helpers/appliance.js';

requireLlamaServer();

// 2,048 tokens of context: a long generation runs for seconds, long enough to look at it.
const MODEL = 'gguf/bench-random-135m-q4_0.gguf';

interface PsModel {
  name: string;
  parallel: number;
  running: number;
  queued: number;
}

async function ps(app: TestAppliance, model: string): Promise<PsModel | undefined> {
  return ((await (await app.fetch('/api/ps')).json()) as { models: PsModel[] }).models.find((m) => m.name === `${model}:latest`);
}

/** Starts a long streamed generation; resolves once its first line arrived, with a way to stop it. */
async function longStream(app: TestAppliance, model: string): Promise<{ stop(): Promise<void> }> {
  const ctl = new AbortController();
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: 'Once upon a time', options: { num_predict: 100_000, temperature: 0 } }),
    signal: ctl.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  return { stop: async () => (ctl.abort(), await reader.cancel().catch(() => undefined)) };
}

t.test('num_parallel per model: its own slot count, shown with what runs and waits', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_BACKENDS: 'gguf=llama-server', LIA_NUM_PARALLEL: '1', LIA_THREADS: '1', LIA_CONTEXT_LENGTH: '2048' } });
  t.teardown(() => app.close());
  await createModel(app, 'wide', MODEL, { parameters: { num_parallel: 3 } });
  await createModel(app, 'one', MODEL);

  const a = await longStream(app, 'wide');
  const b = await longStream(app, 'wide');
  t.match(await ps(app, 'wide'), { parallel: 3, running: 2, queued: 0 }, 'two of its three slots run');
  t.equal((await llamaServerArgs(app, 'wide'))('--parallel'), '3', 'llama-server got three slots');
  await a.stop();
  await b.stop();

  const first = await longStream(app, 'one');
  const second = app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'one', prompt: 'Hello', stream: false, options: { num_predict: 4 } }),
  });
  let seen: PsModel | undefined;
  for (let i = 0; i < 200 && seen?.queued !== 1; i++) {
    seen = await ps(app, 'one');
    if (seen?.queued !== 1) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  t.match(seen, { parallel: 1, running: 1, queued: 1 }, 'the engine default of one slot: the second request waits, and /api/ps says so');
  await first.stop();
  t.equal((await second).status, 200, 'the waiting request is served once the slot is free');
  t.match(await ps(app, 'one'), { running: 0, queued: 0 });
});
