/**
 * Lighthouse (Performance, Accessibility, Best Practices) on the console's sign-in, chat and
 * system pages, in Debian's Chromium against a test appliance with the stories260K-chatml model,
 * plus the JavaScript each page transfers (gzip or brotli, as served).
 *
 *   node --conditions=lia-source --import tsx bench/webui/lighthouse.ts
 *
 * Lighthouse's default profile: a mobile viewport with simulated slow 4G and a 4x slower CPU.
 * The browser trusts the appliance by SPKI hash, as the tests do.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import lighthouse from 'lighthouse';
import { chromium } from 'playwright-core';
import { startTestAppliance } from '../../test/helpers/appliance.js';
import { createModel } from '../../test/helpers/models.js';
import { CHROMIUM, spkiHash } from '../../test/webui/browser.js';

const PORT = 9333;
const app = await startTestAppliance();
await createModel(app, 'stories', 'gguf/stories260K-chatml.gguf');
const profile = await mkdtemp(path.join(os.tmpdir(), 'lia-lh-'));
const spki = [app.hooks.tls.get().current().cert, app.ca].map(spkiHash).join(',');
const chrome = spawn(
  CHROMIUM,
  [
    '--headless=new',
    '--no-sandbox',
    `--remote-debugging-port=${PORT}`,
    `--user-data-dir=${profile}`,
    `--ignore-certificate-errors-spki-list=${spki}`,
    'about:blank',
  ],
  { stdio: 'ignore' },
);
await new Promise((r) => setTimeout(r, 2000));

interface Row {
  page: string;
  performance: number;
  accessibility: number;
  bestPractices: number;
  jsBytes: number;
  fcpMs: number;
  lcpMs: number;
}
const rows: Row[] = [];

async function audit(name: string, url: string): Promise<void> {
  const result = await lighthouse(url, {
    port: PORT,
    output: 'json',
    logLevel: 'error',
    onlyCategories: ['performance', 'accessibility', 'best-practices'],
    disableStorageReset: true,
  });
  const lhr = result!.lhr;
  const requests = (lhr.audits['network-requests']?.details as { items: { resourceType: string; transferSize: number }[] } | undefined)?.items ?? [];
  rows.push({
    page: name,
    performance: Math.round((lhr.categories.performance?.score ?? 0) * 100),
    accessibility: Math.round((lhr.categories.accessibility?.score ?? 0) * 100),
    bestPractices: Math.round((lhr.categories['best-practices']?.score ?? 0) * 100),
    jsBytes: requests.filter((r) => r.resourceType === 'Script').reduce((a, r) => a + r.transferSize, 0),
    fcpMs: Math.round(lhr.audits['first-contentful-paint']?.numericValue ?? 0),
    lcpMs: Math.round(lhr.audits['largest-contentful-paint']?.numericValue ?? 0),
  });
  // Which element the largest paint was, so a slow page says what it waited for.
  const lcpItems = (
    lhr.audits['largest-contentful-paint-element']?.details as { items?: { items?: { node?: { selector?: string; snippet?: string } }[] }[] } | undefined
  )?.items;
  const lcpNode = lcpItems?.[0]?.items?.[0]?.node;
  const weighed = ['first-contentful-paint', 'largest-contentful-paint', 'total-blocking-time', 'cumulative-layout-shift', 'speed-index'];
  console.error(`${name}: ${weighed.map((id) => `${id} ${lhr.audits[id]?.displayValue ?? ''} (${lhr.audits[id]?.score ?? ''})`).join(', ')}`);
  if (lcpNode) console.error(`${name}: largest paint: ${lcpNode.selector ?? ''} ${(lcpNode.snippet ?? '').slice(0, 120)}`);
  for (const [id, a] of Object.entries(lhr.audits)) {
    if (a.score !== null && a.score < 1 && a.scoreDisplayMode === 'binary') console.error(`${name}: ${id}: ${a.title}`);
  }
}

try {
  await audit('sign-in', `${app.url}/ui/`);
  // Sign in once, kept in the browser (localStorage), so the next audits open signed in.
  const browser = await chromium.connectOverCDP(`http://127.0.0.1:${PORT}`);
  const page = await browser.contexts()[0]!.newPage();
  await page.goto(`${app.url}/ui/`);
  await page.getByLabel('API key').fill(app.key);
  await page.getByText('in this browser').click();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Pages' }).waitFor();
  await page.close();
  await audit('chat', `${app.url}/ui/#/chat`);
  await audit('system', `${app.url}/ui/#/system`);
  console.log('| page | Performance | Accessibility | Best Practices | JS transferred | FCP | LCP |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(
      `| ${r.page} | ${r.performance} | ${r.accessibility} | ${r.bestPractices} | ${(r.jsBytes / 1024).toFixed(1)} KiB | ${r.fcpMs} ms | ${r.lcpMs} ms |`,
    );
} finally {
  chrome.kill();
  await app.close();
  await rm(profile, { recursive: true, force: true });
}
