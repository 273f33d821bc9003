/**
 * The web console in real headless Chromium against a real appliance: sign-in, the CA panel,
 * chat streaming with a real model, edit and resend, regenerate, rename, Stop, a second Send refused while busy, reload keeps the
 * conversation, a model's HTML never runs, 390 px without horizontal scroll, dark mode, and
 * axe-core on every page.
 */
import { X509Certificate } from 'node:crypto';
import t from 'tap';
import { createFakeModel, FAKE_BACKEND } from 'lia/testing';
import { createModel } from '../helpers/models.js';
import { axe, overflowsX, startConsole } from './browser.js';

const c = await startConsole({ plugins: { 'fake-backend': FAKE_BACKEND } });
t.teardown(c.close);
await createModel(c.app, 'stories', 'gguf/stories260K-chatml.gguf');
await createFakeModel(c.app, 'echo', 'echo:');
const { page } = c;
const errors: string[] = [];
page.on('pageerror', (e) => errors.push(e.message));

t.test('sign in: the key explained, the CA fingerprint shown, a wrong key refused, the right one kept', async (t) => {
  await page.goto(`${c.app.url}/ui/`);
  await t.resolves(page.getByText('lia key show').first().waitFor(), 'says where the key comes from');
  const fp = new X509Certificate(c.app.ca).fingerprint256;
  await page.getByTestId('ca-fingerprint').filter({ hasText: ':' }).waitFor();
  t.equal(await page.getByTestId('ca-fingerprint').textContent(), fp, "the CA fingerprint is the CA's");
  t.equal(await page.getByRole('link', { name: 'Download the CA certificate' }).getAttribute('href'), '/system/ca-cert');
  await c.shot('sign-in');
  t.same(await axe(page), [], 'axe: no violations on sign-in');

  await page.getByLabel('API key').fill('lia_wrong');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await t.resolves(page.getByRole('alert').filter({ hasText: 'refused' }).waitFor(), 'a wrong key is refused with a message');
  await page.getByLabel('API key').fill(c.app.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Pages' }).waitFor();
  t.equal(await page.evaluate(() => sessionStorage.getItem('lia.key')), c.app.key, 'kept in this tab');
  t.equal(await page.evaluate(() => localStorage.getItem('lia.key')), null, 'not in the browser');
});

t.test('chat: a real model streams an answer with its figures; reload keeps the conversation', async (t) => {
  const model = page.getByLabel('Model');
  await page.locator('#model option').first().waitFor({ state: 'attached' });
  const offered = await page.locator('#model option').allTextContents();
  t.same(offered.sort(), ['echo:latest', 'stories:latest'], 'the chat models are offered');
  await model.selectOption('stories:latest');
  await page.getByRole('button', { name: 'Settings' }).click();
  await page.getByLabel('Max tokens').fill('40');
  await page.getByLabel('Message').fill('Once upon a time');
  await page.getByLabel('Message').press('Enter');
  const stats = page.getByTestId('answer-stats');
  await stats.waitFor({ timeout: 60_000 });
  t.match(await stats.textContent(), /\d+ tokens · [\d.]+ tokens\/s/, 'tokens and tokens/s from the API');
  t.match(await stats.textContent(), /first token \(API\) \d+ ms/, "first token from the API's fields");
  t.ok(Number(/(\d+) tokens/.exec((await stats.textContent()) ?? '')?.[1]) <= 40, 'max tokens reaches the API (num_predict)');
  t.ok(((await page.locator('.msg.assistant .md').textContent()) ?? '').trim().length > 0, 'the answer is on screen');
  await c.shot('chat');
  t.same(await axe(page), [], 'axe: no violations on chat');
  await page.reload();
  await page.locator('.msg.user').first().waitFor();
  t.equal(await page.locator('.msg.user .user-text').textContent(), 'Once upon a time', 'the conversation survives a reload');
  t.equal(await page.locator('.msg.assistant').count(), 1);
});

t.test("a model's <script> and <img onerror> never run", async (t) => {
  await page.getByRole('button', { name: 'New chat', exact: true }).first().click();
  await page.getByLabel('Model').selectOption('echo:latest');
  const payload = 'hi <img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> [x](javascript:window.__xss=3) **bold**';
  await page.getByLabel('Message').fill(payload);
  await page.getByRole('button', { name: 'Send' }).click();
  await page.getByTestId('answer-stats').waitFor();
  await page
    .locator('.msg.assistant a')
    .click()
    .catch(() => undefined);
  await page.waitForTimeout(200);
  t.equal(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss), undefined, 'nothing ran');
  t.equal(await page.locator('.msg.assistant script, .msg.assistant [onerror]').count(), 0, 'no script or handler in the DOM');
  t.equal(await page.locator('.msg.assistant strong').textContent(), 'bold', 'Markdown is rendered');
});

t.test('edit and resend, regenerate, rename', async (t) => {
  const answer = page.locator('.msg.assistant .md');
  await page.getByRole('button', { name: 'Edit', exact: true }).click();
  await page.getByLabel('Edit your message').fill('edited words');
  await page.getByRole('button', { name: 'Save and resend' }).click();
  await answer.filter({ hasText: 'echo: edited words' }).waitFor();
  t.equal(await page.locator('.msg').count(), 2, 'the edit replaced the exchange');
  await page.getByRole('button', { name: 'Regenerate' }).click();
  await page.getByRole('button', { name: 'Regenerate' }).waitFor(); // back once the answer is done
  t.equal((await answer.textContent())?.trim(), 'echo: edited words', 'regenerated in place');
  t.equal(await page.locator('.msg').count(), 2);
  await page
    .locator('.conv-list li[class="active"]')
    .getByRole('button', { name: /^Rename/ })
    .click();
  await page.getByLabel('New name').fill('renamed chat');
  await page.getByLabel('New name').press('Enter');
  await page.getByRole('button', { name: 'renamed chat', exact: true }).waitFor();
  t.equal(
    await page.locator('.conv-list li[class="active"]').getByRole('button', { name: 'renamed chat', exact: true }).count(),
    1,
    'the open conversation is listed under its new name',
  );
});

t.test('Stop ends a stream; a second Send is refused while one runs', async (t) => {
  await page.getByRole('button', { name: 'New chat', exact: true }).first().click();
  await page.getByLabel('Model').selectOption('echo:latest');
  // The echo model repeats the message: 3000 words, streamed through a slowed network.
  const cdp = await c.context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: 20_000, uploadThroughput: 10_000_000 });
  await page.getByLabel('Message').fill(Array.from({ length: 3000 }, (_, i) => `w${i}`).join(' '));
  await page.getByLabel('Message').press('Enter');
  await page.locator('.msg.assistant .md').filter({ hasText: 'echo:' }).waitFor();
  t.ok(await page.getByRole('button', { name: 'Send' }).isDisabled(), 'Send is disabled while the answer streams');
  await page.getByLabel('Message').fill('second');
  await page.getByLabel('Message').press('Enter');
  t.equal(await page.locator('.msg.user').count(), 1, 'Enter during a stream sends nothing');
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.getByTestId('answer-stats').filter({ hasText: 'stopped' }).waitFor();
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
  const text = (await page.locator('.msg.assistant .md').textContent()) ?? '';
  t.ok(text.length > 0 && !text.includes('w2999'), 'the answer stopped part way');
  t.equal(await page.getByRole('button', { name: 'Stop' }).count(), 0, 'no Stop once stopped');
  t.equal(await page.getByLabel('Message').inputValue(), 'second', 'the draft is kept');
  t.ok(await page.getByRole('button', { name: 'Send' }).isEnabled(), 'Send works again');
});

t.test('390 px: no horizontal scroll on any page; dark mode follows the system and the toggle', async (t) => {
  await page.setViewportSize({ width: 390, height: 844 });
  for (const route of ['chat', 'models', 'system', 'keys', 'trust']) {
    await page.goto(`${c.app.url}/ui/#/${route}`);
    await page.locator('h1').first().waitFor();
    await page.waitForTimeout(300);
    t.notOk(await overflowsX(page), `${route}: no horizontal scroll at 390 px`);
  }
  await page.goto(`${c.app.url}/ui/#/chat`);
  await page.locator('#model option').first().waitFor({ state: 'attached' });
  await c.shot('chat-390');
  await page.setViewportSize({ width: 1200, height: 800 });
  const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  const light = await bg();
  await page.emulateMedia({ colorScheme: 'dark' });
  const dark = await bg();
  t.not(dark, light, 'the page turns dark with the system');
  t.same(await axe(page), [], 'axe: no violations in dark mode');
  await page.emulateMedia({ colorScheme: 'light' });
  await page.getByRole('button', { name: /^Theme/ }).click(); // system → light
  await page.getByRole('button', { name: /^Theme/ }).click(); // light → dark
  t.equal(await bg(), dark, 'the toggle switches to dark against a light system');
  await page.reload();
  t.equal(await bg(), dark, 'the choice is kept');
  await c.shot('chat-dark');
  await page.getByRole('button', { name: /^Theme/ }).click(); // dark → system
});

t.test('axe-core: models and system pages', async (t) => {
  for (const route of ['models', 'system', 'keys', 'trust']) {
    await page.goto(`${c.app.url}/ui/#/${route}`);
    await page.locator('h1').first().waitFor();
    await page.waitForLoadState('networkidle');
    t.same(await axe(page), [], `axe: no violations on ${route}`);
  }
  t.same(errors, [], 'no script errors in the page');
});
