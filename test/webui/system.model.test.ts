/**
 * The console's management pages in real headless Chromium against a real appliance: delete a
 * model with confirmation, import a GGUF by upload, pull from a real registry, stop and start svc-webui (the page then says it is stopped), read a
 * service's logs, create and revoke a named key, rotate the master key (shown once, the console keeps working, the old key is
 * refused), and a key refused later leads back to sign-in with a message.
 */
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { fixture } from '../helpers/fixtures.js';
import { startTestRegistry } from '../helpers/registry.js';
import { startConsole } from './browser.js';

const c = await startConsole({ plugins: { 'fake-backend': FAKE_BACKEND } });
t.teardown(c.close);
await createFakeModel(c.app, 'keepme', 'keep:');
await createFakeModel(c.app, 'dropme', 'drop:');
const { page } = c;

t.test('models: delete asks first, then the model is gone', async (t) => {
  await c.open('models');
  await page.locator('tr[data-model="dropme:latest"]').waitFor();
  await c.shot('models');
  await page.getByRole('button', { name: 'Delete dropme:latest' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  t.equal(await page.locator('tr[data-model="dropme:latest"]').count(), 1, 'cancel keeps it');
  await page.getByRole('button', { name: 'Delete dropme:latest' }).click();
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.locator('tr[data-model="dropme:latest"]').waitFor({ state: 'detached' });
  const tags = (await (await c.app.fetch('/api/tags')).json()) as { models: { name: string }[] };
  t.notOk(
    tags.models.some((m) => m.name === 'dropme:latest'),
    'the appliance no longer has it',
  );
});

t.test('models: a GGUF file from disk is uploaded and created', async (t) => {
  await page.getByLabel('File', { exact: true }).setInputFiles(fixture('gguf/stories260K.gguf'));
  await page.getByLabel('Model name', { exact: true }).fill('uploaded');
  await page.getByRole('button', { name: 'Import', exact: true }).click();
  await page.locator('tr[data-model="uploaded:latest"]').waitFor();
  t.match(await page.getByRole('status').filter({ hasText: 'created' }).textContent(), /created uploaded/);
  const show = await c.app.fetch('/api/show', { method: 'POST', body: JSON.stringify({ model: 'uploaded' }) });
  t.equal(show.status, 200, 'the appliance has the model');
});

t.test('models: pull from a registry with progress', async (t) => {
  const reg = await startTestRegistry();
  t.teardown(reg.close);
  const remote = `${reg.host}/library/pulled:latest`;
  const copy = await c.app.fetch('/api/copy', { method: 'POST', body: JSON.stringify({ source: 'keepme', destination: remote }) });
  t.equal(copy.status, 200);
  const push = await c.app.fetch('/api/push', { method: 'POST', body: JSON.stringify({ model: remote, insecure: true, stream: false }) });
  t.equal(push.status, 200, await push.text());
  await c.app.fetch('/api/delete', { method: 'DELETE', body: JSON.stringify({ model: remote }) });
  await page.reload();
  await page.getByLabel(/^Name \(from the configured registry/).fill(remote);
  await page.getByLabel('the registry serves plain HTTP (insecure)').check();
  await page.getByRole('button', { name: 'Pull', exact: true }).click();
  await page.getByTestId('pull-status').filter({ hasText: 'success' }).waitFor();
  t.ok((await page.locator('form progress').count()) >= 1, 'a progress bar per layer');
  await page.locator(`tr[data-model="${remote}"]`).waitFor();
  const tags = (await (await c.app.fetch('/api/tags')).json()) as { models: { name: string }[] };
  t.ok(
    tags.models.some((m) => m.name === remote),
    'the pulled model is listed, and the appliance has it',
  );
});

t.test('system: the time axis of the charts shows the last minutes of today, before and after the first sample', async (t) => {
  await page.goto(`${c.app.url}/ui/#/system`);
  const chart = page.locator('figure.chart [data-time-to]').first();
  await chart.waitFor({ state: 'attached' });
  const range = async () => {
    const [from, to] = await Promise.all([chart.getAttribute('data-time-from'), chart.getAttribute('data-time-to')]);
    return { from: Number(from), to: Number(to) };
  };
  const now = Date.now() / 1000;
  const day = 24 * 3600;
  const first = await range();
  t.ok(Math.abs(first.to - now) < day, `the axis ends today (${new Date(first.to * 1000).toISOString()})`);
  t.ok(first.to > first.from && first.to - first.from <= 3600, 'and spans minutes, not years');
  await page
    .getByText(/^\d+ %$/)
    .first()
    .waitFor();
  await page.waitForFunction(() => document.querySelector('figure.chart [data-time-to]')?.getAttribute('data-time-to') !== null);
  const later = await range();
  t.ok(Math.abs(later.to - Date.now() / 1000) < day, 'still today once samples arrive');
});

t.test('system: stop and start svc-webui; logs', async (t) => {
  await page.goto(`${c.app.url}/ui/#/system`);
  const row = page.locator('tr[data-service="svc-webui"]');
  await row.getByTestId('service-state').filter({ hasText: 'active' }).waitFor();
  await c.shot('system');
  await row.getByRole('button', { name: 'stop svc-webui' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Stop' }).click();
  await row.getByTestId('service-state').filter({ hasText: 'inactive' }).waitFor();
  const stopped = await c.app.fetch('/ui/', { auth: false });
  t.equal(stopped.status, 503);
  t.match(await stopped.text(), /web console is stopped/, 'a new visit gets a page saying so, not JSON');
  await row.getByRole('button', { name: 'start svc-webui', exact: true }).click();
  await row
    .getByTestId('service-state')
    .filter({ hasText: /^active$/ })
    .waitFor();
  t.equal((await c.app.fetch('/ui/', { auth: false })).status, 200, 'started again from the same tab');

  await page.getByLabel('Service', { exact: true }).selectOption('svc-webui');
  await page.getByTestId('logs').filter({ hasText: /\S/ }).waitFor();
  t.ok(((await page.getByTestId('logs').textContent()) ?? '').length > 0, 'the log viewer shows lines');
});

t.test('keys: a named key is created with its scopes (secret shown once), works within them, and revoking refuses it', async (t) => {
  await page.goto(`${c.app.url}/ui/#/keys`);
  await page.getByLabel('Name', { exact: true }).fill('ci-bot');
  await page.getByRole('button', { name: 'Create', exact: true }).click();
  const secret = (await page.getByTestId('new-named-key').textContent()) ?? '';
  t.match(secret, /^lia_/, 'the secret is shown');
  const row = page.getByRole('row', { name: /ci-bot/ });
  await row.waitFor();
  t.match(await row.textContent(), /inference, models:read/, 'listed with the default scopes of the form');
  const as = (path: string) => c.app.fetch(path, { headers: { authorization: `Bearer ${secret}` } });
  t.equal((await as('/api/tags')).status, 200, 'the key lists models (models:read)');
  t.equal((await as('/system/status')).status, 403, 'but may not read the system');
  await row.getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
  await row.waitFor({ state: 'detached' });
  t.equal((await as('/api/tags')).status, 401, 'a revoked key is refused');
});

t.test('master key rotation: shown once, the console keeps working, the old key is refused', async (t) => {
  const oldKey = c.app.key;
  await page.goto(`${c.app.url}/ui/#/system`);
  await page.getByRole('button', { name: 'Rotate the master key' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Rotate' }).click();
  const newKey = (await page.getByTestId('new-key').textContent()) ?? '';
  t.match(newKey, /^lia_/, 'the new key is shown');
  t.not(newKey, oldKey);
  const old = await c.app.fetch('/api/tags', { headers: { authorization: `Bearer ${oldKey}` } });
  t.equal(old.status, 401, 'the old key is refused');
  t.equal(await page.evaluate(() => sessionStorage.getItem('lia.key')), newKey, 'the console switched to the new key');
  await page.goto(`${c.app.url}/ui/#/models`);
  await page.locator('tr[data-model="keepme:latest"]').waitFor();
  t.equal(await page.locator('tr[data-model="keepme:latest"]').count(), 1, 'the console still lists models after rotation');

  // A key that stops working (rotated elsewhere) leads back to sign-in with the reason.
  await page.evaluate(() => sessionStorage.setItem('lia.key', 'lia_revoked'));
  await page.reload();
  await page.getByText('You were signed out').waitFor();
  t.match(await page.getByRole('alert').first().textContent(), /refused the key/, 'with the reason');
  t.ok(await page.getByLabel('API key').isVisible(), 'back at sign-in');
});
