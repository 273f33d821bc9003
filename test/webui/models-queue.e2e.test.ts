/**
 * The queue on the web console's models page, in real headless Chromium: with one slot, a stream
 * holding it and a second request waiting, the loaded model shows its slots in use out of its
 * slots, one queued, its context per slot, engine and device; when the stream is let go the page,
 * which polls `/api/ps` every 2 s, shows the slot free and nobody queued without a reload. axe
 * finds no violations on the card, and 390 px does not scroll sideways.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { axe, overflowsX, startConsole } from './browser.js';
import { readUntil } from '../helpers/stream-reader.js';
import { waitFor } from '../helpers/wait.js';

const c = await startConsole({
  plugins: {
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 20 } },
  },
  env: { LIA_NUM_PARALLEL: '1', LIA_CONTEXT_LENGTH: '2048' },
});
t.teardown(c.close);
const { app, page } = c;
await createFakeModel(app, 'parrot', 'parrot says:');
const errors: string[] = [];
page.on('pageerror', (e) => errors.push(e.message));

const json = { 'content-type': 'application/json' };
// 2,000 words 20 ms apart: a stream that holds the slot until the test lets it go.
const LONG = Array.from({ length: 2000 }, (_, i) => `word${i}`).join(' ');
const generate = (prompt: string, stream: boolean, signal?: AbortSignal) =>
  app.fetch('/api/generate', { method: 'POST', headers: json, body: JSON.stringify({ model: 'parrot', prompt, stream }), ...(signal ? { signal } : {}) });
const queuedNow = async () => ((await (await app.fetch('/api/ps')).json()) as { models: { queued: number }[] }).models[0]?.queued;

const loaded = page.getByRole('region', { name: 'Loaded in memory' }).locator('li[data-model="parrot:latest"]');
const fact = (id: string) => loaded.getByTestId(id);

t.test('models: a held slot and a waiting request show on the loaded model, and go once served', async (t) => {
  const ctl = new AbortController();
  const held = await generate(LONG, true, ctl.signal);
  t.equal(held.status, 200);
  // Read on: an answer nobody holds on to is collected, and undici then closes its connection.
  const reading = readUntil(held.body as ReadableStream<Uint8Array>, /"response":"[^"]/).then((rest) => rest().catch(() => ''));
  const waiting = generate('hi', false).then(async (res) => (await res.arrayBuffer(), res.status));
  await waitFor('the second request to be queued', async () => (await queuedNow()) === 1);

  await c.open('models');
  await loaded.waitFor();
  t.equal(await fact('slots').textContent(), '1 / 1', 'its one slot is in use');
  t.equal(await fact('queued').textContent(), '1', 'one request waits');
  t.equal(await fact('context').textContent(), '2,048 tokens', 'context per slot');
  t.equal(await fact('engine').textContent(), 'fake', 'the engine');
  t.equal(await fact('device').textContent(), 'cpu', 'the device');
  t.same(await axe(page), [], 'axe: no violations with the slots and queue shown');

  ctl.abort();
  await reading;
  t.equal(await waiting, 200, 'the waiting request is served');
  // No reload: the page's poll of /api/ps brings the change.
  await page.waitForFunction(() => document.querySelector('li[data-model="parrot:latest"] [data-testid="queued"]')?.textContent === '0', undefined, {
    timeout: 15_000,
  });
  t.equal(await fact('slots').textContent(), '0 / 1', 'the slot is free again');
  t.equal(await fact('queued').textContent(), '0', 'nobody waits');
});

t.test('models at 390 px: the loaded model and its figures do not scroll sideways', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await loaded.waitFor();
  await page.waitForTimeout(300);
  t.notOk(await overflowsX(page), 'no horizontal scroll at 390 px');
  await c.shot('models-queue');
  await page.setViewportSize({ width: 1200, height: 800 });
  t.same(errors, [], 'no script errors in the page');
});
