/**
 * Time from Send to the first token painted in the web console's chat, against the first token of
 * the same request made straight to the API, in one run on one appliance.
 *
 *   node --conditions=lia-source --import tsx bench/webui/first-token.ts [--rounds 30]
 *
 * Browser side (Debian's Chromium, headless): the page records `performance.now()` when Enter goes
 * down in the message box (a capture listener, before the page's own handler), watches the answer
 * with a MutationObserver, and at the first text in it waits for the next animation frame and a
 * task after it, the point where the frame holding the text has been handed to the compositor.
 * API side: `POST /api/chat` with the same messages and a streamed answer, timed from the request to
 * the first NDJSON line holding text, by a Node client on the same machine. Rounds alternate
 * between the two, each on a new conversation, with the model already loaded. The API's own figure
 * (load plus prompt evaluation, from its final line) is reported beside them, and so is the moment
 * the text reached the page, before the frame that paints it.
 *
 * Model: stories260K-chatml (tiny, so the figure is the console's and the transport's own cost,
 * not the model's), answers capped at 16 tokens by the model's parameters.
 */
import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';
import { startTestAppliance } from '../../test/helpers/appliance.js';
import { createModel } from '../../test/helpers/models.js';
import { CHROMIUM, spkiHash } from '../../test/webui/browser.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '30' } } });
const ROUNDS = Number(values.rounds);
const PROMPT = 'Tell me a short story about a cat.';

const app = await startTestAppliance();
await createModel(app, 'stories', 'gguf/stories260K-chatml.gguf', { parameters: { num_predict: 16, temperature: 0 } });
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${[app.hooks.tls.get().current().cert, app.ca].map(spkiHash).join(',')}`],
});
const page = await (await browser.newContext({ viewport: { width: 1200, height: 800 } })).newPage();

// In-page instrumentation, as a string: code compiled by the benchmark's loader would carry helper
// calls the page does not define.
const INSTRUMENT = `(() => {
  const ft = { samples: [], pending: false, t0: 0 };
  window.__ft = ft;
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey && e.target && e.target.id === 'prompt') { ft.t0 = performance.now(); ft.pending = true; }
  }, true);
  new MutationObserver(() => {
    if (!ft.pending) return;
    const answers = document.querySelectorAll('.msg.assistant .md');
    const last = answers[answers.length - 1];
    if (!last || last.textContent.trim() === '') return;
    ft.pending = false;
    const t0 = ft.t0;
    const inDom = performance.now() - t0;
    requestAnimationFrame(() => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => ft.samples.push({ painted: performance.now() - t0, inDom });
      channel.port2.postMessage(0);
    });
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
})()`;

await page.goto(`${app.url}/ui/#/chat`);
await page.getByLabel('API key').fill(app.key);
await page.getByRole('button', { name: 'Sign in' }).click();
await page.getByRole('navigation', { name: 'Pages' }).waitFor();
await page.evaluate(INSTRUMENT);
await page
  .getByLabel('Model')
  .selectOption('stories')
  .catch(() => undefined);

interface BrowserRound {
  painted: number;
  inDom: number;
}
async function browserRound(): Promise<BrowserRound> {
  await page.locator('button.primary', { hasText: 'New chat' }).click();
  const before = await page.evaluate<number>('window.__ft.samples.length');
  const box = page.getByLabel('Message');
  await box.fill(PROMPT);
  await box.press('Enter');
  await page.getByTestId('answer-stats').last().waitFor();
  // Polled from here: the page's CSP refuses the string evaluation waitForFunction polls with.
  while ((await page.evaluate<number>('window.__ft.samples.length')) <= before) await new Promise((r) => setTimeout(r, 20));
  return page.evaluate<BrowserRound>(`window.__ft.samples[${before}]`);
}

interface ApiRound {
  client: number;
  server: number;
}
async function apiRound(): Promise<ApiRound> {
  const started = performance.now();
  const res = await app.fetch('/api/chat', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: PROMPT }], stream: true }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let client: number | undefined;
  let server = 0;
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffer.slice(0, nl)) as { message?: { content?: string }; done?: boolean; load_duration?: number; prompt_eval_duration?: number };
      buffer = buffer.slice(nl + 1);
      if (client === undefined && line.message?.content) client = performance.now() - started;
      if (line.done) server = ((line.load_duration ?? 0) + (line.prompt_eval_duration ?? 0)) / 1e6;
    }
  }
  if (client === undefined) throw new Error('the API answered without text');
  return { client, server };
}

// Warm-up: loads the model and the page's code paths; not counted.
await apiRound();
await browserRound();

const browserRounds: BrowserRound[] = [];
const api: ApiRound[] = [];
for (let i = 0; i < ROUNDS; i++) {
  browserRounds.push(await browserRound());
  api.push(await apiRound());
}
await browser.close();
await app.close();

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const quartiles = (xs: number[]): string => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[Math.floor(s.length / 4)]!.toFixed(1)}-${s[Math.floor((3 * s.length) / 4)]!.toFixed(1)}`;
};
const painted = browserRounds.map((b) => b.painted);
const apiClient = api.map((a) => a.client);
const apiServer = api.map((a) => a.server);
console.log(`| figure (${ROUNDS} rounds each, ms) | median | interquartile range |`);
console.log('|---|---:|---:|');
console.log(`| Send to first token painted (browser) | ${median(painted).toFixed(1)} | ${quartiles(painted)} |`);
console.log(`| request to first token received (API client) | ${median(apiClient).toFixed(1)} | ${quartiles(apiClient)} |`);
console.log(
  `|   of which Enter to first text in the page (before the frame that paints it) | ${median(browserRounds.map((b) => b.inDom)).toFixed(1)} | ${quartiles(browserRounds.map((b) => b.inDom))} |`,
);
console.log(`| the API's own figure (load + prompt evaluation) | ${median(apiServer).toFixed(1)} | ${quartiles(apiServer)} |`);
console.log(`\nconsole overhead (median painted minus median API client): ${(median(painted) - median(apiClient)).toFixed(1)} ms (goal: 20 ms or less)`);
