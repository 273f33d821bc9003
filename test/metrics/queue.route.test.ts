/**
 * `/metrics` per model, through `inject()` on the appliance with the fake backend (one slot by
 * default, words 20 ms apart): `lia_model_slots` gives each loaded model's slots (its
 * `num_parallel`, else the engine's), `lia_model_busy_slots` the requests on them and
 * `lia_model_queue_depth` those waiting for one; once the answers are over, nothing is busy or
 * queued and the slots stay.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { ENGINE_ONLY } from '../helpers/plugin-sets.js';
import { readUntil } from '../helpers/stream-reader.js';
import { waitFor } from '../helpers/wait.js';

const app = await startTestAppliance({
  listen: false,
  plugins: { ...ENGINE_ONLY, 'backend-llama-cpp': false, 'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 20 } } },
  env: { LIA_NUM_PARALLEL: '1' },
});
t.teardown(() => app.close());
await createFakeModel(app, 'parrot', 'parrot says:');
const json = { 'content-type': 'application/json' };
const created = await app.fetch('/api/create', {
  method: 'POST',
  headers: json,
  body: JSON.stringify({ model: 'wide', from: 'parrot', parameters: { num_parallel: 3 }, stream: false }),
});
if (created.status !== 200) throw new Error(`creating wide: ${created.status} ${await created.text()}`);
await created.arrayBuffer();

// 500 words 20 ms apart: about 10 s, long enough to scrape while it runs (inject() cannot abort it).
const LONG = Array.from({ length: 500 }, (_, i) => `word${i}`).join(' ');

/** The value of `series{model="NAME:latest"}`, or null without such a series. */
function value(text: string, series: string, model: string): number | null {
  const m = new RegExp(`^${series}\\{model="${model}:latest"\\} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : null;
}

const scrape = async (): Promise<string> => (await app.fetch('/metrics')).text();

/** Starts a long stream; resolves once its first word arrived, with the read of the rest. */
async function stream(model: string): Promise<() => Promise<string>> {
  const res = await app.fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model, prompt: LONG }) });
  if (res.status !== 200) throw new Error(`streaming ${model}: ${res.status} ${await res.text()}`);
  return readUntil(res.body as ReadableStream<Uint8Array>, /"response":"[^"]/);
}

t.test('slots, busy slots and queue depth per model', async (t) => {
  const narrow = await stream('parrot');
  const waiting = app
    .fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt: 'hi', stream: false }) })
    .then(async (res) => (await res.arrayBuffer(), res.status));
  const wide = await stream('wide');
  const text = await waitFor('the second parrot request to be queued', async () => {
    const s = await scrape();
    return value(s, 'lia_model_queue_depth', 'parrot') === 1 && s;
  });
  t.equal(value(text, 'lia_model_slots', 'parrot'), 1, "parrot: the engine's one slot");
  t.equal(value(text, 'lia_model_slots', 'wide'), 3, 'wide: its num_parallel 3');
  t.equal(value(text, 'lia_model_busy_slots', 'parrot'), 1, 'parrot: its slot is busy');
  t.equal(value(text, 'lia_model_busy_slots', 'wide'), 1, 'wide: one of three busy');
  t.equal(value(text, 'lia_model_queue_depth', 'wide'), 0, 'wide: nobody waits');
  t.match(text, /^# HELP lia_model_slots Slots of a loaded model/m, 'the gauge is described');

  await Promise.all([narrow(), wide()]);
  t.equal(await waiting, 200, 'the queued request was served once the slot was free');
  const after = await waitFor('the slots to be free', async () => {
    const s = await scrape();
    return value(s, 'lia_model_busy_slots', 'parrot') === 0 && s;
  });
  t.equal(value(after, 'lia_model_queue_depth', 'parrot'), 0);
  t.equal(value(after, 'lia_model_busy_slots', 'wide'), 0);
  t.equal(value(after, 'lia_model_slots', 'parrot'), 1, 'the slots stay while the model is loaded');
  t.equal(value(after, 'lia_model_slots', 'wide'), 3);
});
