/**
 * The spare runner (backend.ts, `prewarm`): a load takes it, and the next one starts only once no
 * loaded model has had work for a second, so that its start-up does not slow the new model's first
 * requests.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, runnerPids, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance();
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);

async function until(what: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (what()) return true;
  return what();
}

t.test('the next spare waits for a quiet second after a load', async (t) => {
  t.ok(await until(() => runnerPids().length === 1, 20_000), 'a spare runner waits before any load');
  const spare = runnerPids()[0];
  await ollama.generate({ model: 'stories', prompt: '' });
  t.same(runnerPids(), [spare], 'the load took the spare; no new one yet');
  const busyUntil = Date.now() + 2000;
  while (Date.now() < busyUntil) await ollama.generate({ model: 'stories', prompt: 'Once', options: { num_predict: 8 } });
  t.same(runnerPids(), [spare], 'none while requests keep coming');
  t.ok(await until(() => runnerPids().length === 2, 10_000), 'a new spare once the model has been quiet');
});
