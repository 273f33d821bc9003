/**
 * Where llama-server is built, GGUF text models run on it with no setting (the default engine,
 * docs/decisions.md), and the appliance keeps no spare node-llama-cpp runner (backend-llama-cpp's
 * `prewarm` applies only while GGUF text comes to it by default; the spare itself, with
 * `backends: { gguf: llama-cpp }`: test/engine/spare.model.test.ts).
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, runnerPids, startEngineAppliance } from '../engine/helpers.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();

t.test('no backends setting: no spare runner, and text runs on llama-server', async (t) => {
  const app = await startEngineAppliance({ env: { LIA_CONTEXT_LENGTH: '256' } });
  t.teardown(() => app.close());
  // A spare is forked as the appliance becomes ready; give one time to show.
  await new Promise((r) => setTimeout(r, 3000));
  t.same(runnerPids(), [], 'no node-llama-cpp runner at start');
  await createModel(app, 'stories', 'gguf/stories260K.gguf');
  const answer = await ollamaClient(app).generate({ model: 'stories', prompt: 'Once upon a time', options: { num_predict: 4 } });
  t.equal(answer.done, true);
  const servers = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-server') as unknown as { processes(): Array<{ model: string }> };
  t.same(
    servers.processes().map((p) => p.model),
    ['stories:latest'],
    'served by a llama-server',
  );
  t.same(runnerPids(), [], 'and still no runner');
});
