/**
 * Remote models in the web console, in real headless Chromium: a front appliance whose
 * `backend-upstream` serves a model of a second appliance beside a local model. The models page
 * marks the remote one with a badge and its upstream's host (list and details), shows no size
 * for it, and offers no copy or delete for it (a note says lia.config manages it) while the
 * local model keeps both; pulling its name says the upstream serves it; the chat picker offers
 * it and it answers; the loaded list says "remote" instead of a size; axe finds no violations
 * and 390 px does not scroll sideways.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { startTestAppliance } from '../helpers/appliance.js';
import { axe, overflowsX, startConsole } from './browser.js';
import { upstreamAccess } from '../helpers/upstream-access.js';

const UNUSED = { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false, 'backend-transformers': false } as const;

const upstream = await startTestAppliance({ plugins: { ...UNUSED, 'fake-backend': FAKE_BACKEND } });
t.teardown(() => upstream.close());
await createFakeModel(upstream, 'echo', 'far:');
const access = await upstreamAccess(t, upstream);

const c = await startConsole({
  plugins: {
    'fake-backend': FAKE_BACKEND,
    'backend-upstream': {
      options: {
        upstreams: [{ name: 'up', url: upstream.url, flavour: 'openai', ...access, models: [{ model: 'echo', name: 'far-echo' }] }],
      },
    },
  },
});
t.teardown(c.close);
await createFakeModel(c.app, 'local', 'near:');
const { page } = c;
const errors: string[] = [];
page.on('pageerror', (e) => errors.push(e.message));
const remote = page.locator('tr[data-model="far-echo:latest"]');
const local = page.locator('tr[data-model="local:latest"]');

t.test('models: the remote model is marked with its host and offers no copy or delete; the local one keeps both', async (t) => {
  await c.open('models');
  await remote.waitFor();
  await local.waitFor();
  t.equal(await remote.locator('.badge').textContent(), 'remote', 'a remote badge');
  t.equal(await remote.getByTestId('remote-host').textContent(), upstream.url, 'the upstream host');
  t.equal(await local.locator('.badge').count(), 0, 'no badge on the local model');
  t.equal(await remote.getByRole('button', { name: /^(Copy|Delete)/ }).count(), 0, 'no copy or delete for the remote model');
  t.match(await remote.locator('.remote-note').textContent(), /upstream configured in lia\.config/, 'says where it is managed');
  t.equal(await local.getByRole('button', { name: 'Copy local:latest' }).count(), 1, 'the local model has Copy');
  t.equal(await local.getByRole('button', { name: 'Delete local:latest' }).count(), 1, 'and Delete');
  const cells = await remote.locator('td').allTextContents();
  t.equal(cells[0], '–', 'no size for the remote model');
  t.same(cells.slice(1, 4), ['–', '–', '–'], 'no family, parameters or quantisation');
  t.match(cells[4], /completion/, 'its capabilities');
  t.notMatch(cells.join(' '), /undefined|null|NaN|0 B/, 'nothing garbled');
});

t.test('models: the details say where the remote model is served and how it is managed', async (t) => {
  await remote.getByRole('button', { name: 'Details of far-echo:latest' }).click();
  const details = page.getByRole('region', { name: 'far-echo:latest' });
  await details.getByTestId('remote-host').waitFor();
  t.equal(await details.getByTestId('remote-host').textContent(), upstream.url, 'the upstream host');
  t.equal(await details.locator('.badge').textContent(), 'remote');
  const text = (await details.textContent()) ?? '';
  t.match(text, /as echo\./, 'its name on the upstream');
  t.match(text, /copy and delete do not apply/);
  t.match(text, /lia\.config/);
});

t.test("models: pulling the remote model's name says that the upstream serves it", async (t) => {
  await page.getByLabel(/^Name \(from the configured registry/).fill('far-echo');
  await page.getByRole('button', { name: 'Pull', exact: true }).click();
  const alert = page.getByRole('alert').filter({ hasText: 'is a remote model' });
  await alert.waitFor();
  t.match(await alert.textContent(), /"far-echo:latest" is a remote model served by https:\/\/localhost:\d+ \(as "echo"\); it is not pulled/);
  t.equal(await page.getByTestId('pull-status').count(), 0, 'no progress status left behind');
  await page.waitForLoadState('networkidle');
  t.same(await axe(page), [], 'axe: no violations on the models page with a remote model, its details and the error');
});

t.test('models at 390 px: no horizontal scroll with a remote model', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 });
  await page.reload();
  await remote.waitFor();
  await page.waitForTimeout(300);
  t.notOk(await overflowsX(page), 'no horizontal scroll at 390 px');
  await page.setViewportSize({ width: 1200, height: 800 });
});

t.test('chat: the picker offers the remote model and it answers; the loaded list says remote', async (t) => {
  await page.goto(`${c.app.url}/ui/#/chat`);
  await page.locator('#model option').first().waitFor({ state: 'attached' });
  t.same((await page.locator('#model option').allTextContents()).sort(), ['far-echo:latest', 'local:latest'], 'both chat models offered');
  await page.getByLabel('Model').selectOption('far-echo:latest');
  await page.getByLabel('Message').fill('hello remote');
  await page.getByLabel('Message').press('Enter');
  await page.getByTestId('answer-stats').waitFor();
  t.equal((await page.locator('.msg.assistant .md').textContent())?.trim(), 'far: hello remote', 'the upstream answered');

  await page.goto(`${c.app.url}/ui/#/models`);
  const loaded = page.getByRole('region', { name: 'Loaded in memory' }).locator('li').filter({ hasText: 'far-echo:latest' });
  await loaded.waitFor();
  t.match(await loaded.textContent(), /far-echo:latest · remote/, 'remote instead of a size');
  t.notMatch(await loaded.textContent(), /0 B/);
  t.same(errors, [], 'no script errors in the page');
});
