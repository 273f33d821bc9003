/**
 * node-llama-cpp's spare runner (backend.ts, `prewarm`): a load takes it, and the next one starts only once no
 * loaded model has had a request in flight for a while, so that its start-up does not slow the new
 * model's first requests.
 *
 * The runner processes are observed with `ps`. "Work in flight" is made certain rather than timed:
 * several clients keep requests going at once, so the model always has one in its runner, and they
 * keep going for at least a few quiet periods, and the runners are listed while they still run.
 * Listing runs `ps` asynchronously: blocking this process (which is also the server) for a while
 * would hold back the runners' answers and make a model that is busy look quiet. The waits poll a
 * condition with generous bounds.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { ON_LLAMA_CPP } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { waitFor } from '../helpers/wait.js';
import { ollamaClient, runnerPids, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance({ env: ON_LLAMA_CPP });
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);

/** {@link runnerPids} without blocking the event loop. */
async function runnerPidsNow(): Promise<number[]> {
  const { stdout } = await promisify(execFile)('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  return stdout
    .split('\n')
    .filter((l) => l.includes('runner/main'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

/** Longer than the backend's quiet period (1 s), so that a spare started too early would be seen. */
const BUSY_AT_LEAST_MS = 3000;
const CLIENTS = 3;

t.test('a load takes the spare; the next spare starts only once the model is quiet', async (t) => {
  const [spare] = await waitFor('a spare runner before any load', () => runnerPids().length === 1 && runnerPids(), { timeoutMs: 60_000 });

  // Clients that keep requests in flight from the load on (the first requests wait for the load).
  let stop = false;
  let answers = 0;
  const client = async () => {
    while (!stop) {
      await ollama.generate({ model: 'stories', prompt: 'Once', options: { num_predict: 8 } });
      answers++;
    }
  };
  const clients = Array.from({ length: CLIENTS }, client);
  const busySince = Date.now();
  await waitFor('the busy period', () => Date.now() - busySince >= BUSY_AT_LEAST_MS && answers >= 10 * CLIENTS, { timeoutMs: 120_000 });
  const duringWork = await runnerPidsNow();
  const answersBefore = answers;
  await waitFor('answers after the listing', () => answers > answersBefore, { timeoutMs: 60_000 });
  stop = true;
  await Promise.all(clients);

  t.same(duringWork, [spare], 'the load took the spare, and no runner started while requests kept coming');
  const next = await waitFor('a new spare once the model is quiet', () => runnerPids().length === 2 && runnerPids(), { timeoutMs: 60_000 });
  t.ok(next.includes(spare as number), 'the loaded model still runs in the former spare');
  const answer = await ollama.generate({ model: 'stories', prompt: 'Once', options: { num_predict: 4 } });
  t.equal(answer.done, true, 'the model answers beside the new spare');
  t.same(runnerPids(), next, 'a request does not use up the spare');
});
