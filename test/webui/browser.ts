/**
 * One real appliance and one headless Chromium (Debian's `chromium`, driven by playwright-core)
 * for a web console test file. The browser trusts the appliance's CA by its public key
 * (`--ignore-certificate-errors-spki-list` with the SPKI hashes of the appliance's leaf and CA), so
 * no certificate check is switched off wholesale: any other certificate would still be refused.
 *
 * @module
 */
import { createHash, X509Certificate } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { startTestAppliance, type TestAppliance, type TestApplianceOptions } from '../helpers/appliance.js';
import { projectPath } from 'lia/utils';

export const CHROMIUM = process.env['LIA_TEST_CHROMIUM'] ?? '/usr/bin/chromium';

export interface ConsoleFixture {
  app: TestAppliance;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Opens `/ui/#/<route>` signed in with the master key (kept in the tab). */
  open(route?: string): Promise<void>;
  /** Saves a screenshot under docs/img/ when LIA_SCREENSHOTS=1. */
  shot(name: string): Promise<void>;
  close(): Promise<void>;
}

/** Base64 SHA-256 of the certificate's SubjectPublicKeyInfo, as Chromium's SPKI list wants it. */
export function spkiHash(pem: string): string {
  const der = new X509Certificate(pem).publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('base64');
}

export interface BrowserOptions {
  /** More Chromium switches (a fake microphone, say). */
  args?: string[];
}

/** A headless Chromium that trusts `app`'s certificate (and no other), with `args` added. */
export function launchBrowser(app: TestAppliance, args: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    // Chromium matches the list against the chain the server presents (the leaf), so both the
    // leaf's key and the CA's are listed.
    args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${[app.hooks.tls.get().current().cert, app.ca].map(spkiHash).join(',')}`, ...args],
  });
}

/** Opens `/ui/#/<route>` in `page`, signing in with the master key (kept in the tab) when asked. */
export async function openConsole(page: Page, app: TestAppliance, route = 'chat'): Promise<void> {
  await page.goto(`${app.url}/ui/#/${route}`);
  const key = page.getByLabel('API key');
  if (await key.isVisible().catch(() => false)) {
    await key.fill(app.key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('navigation', { name: 'Pages' }).waitFor();
  }
}

export async function startConsole(options: TestApplianceOptions = {}, browserOptions: BrowserOptions = {}): Promise<ConsoleFixture> {
  const app = await startTestAppliance(options);
  const browser = await launchBrowser(app, browserOptions.args);
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 }, colorScheme: 'light' });
  const page = await context.newPage();
  return {
    app,
    browser,
    context,
    page,
    open(route) {
      return openConsole(page, app, route);
    },
    async shot(name) {
      if (process.env['LIA_SCREENSHOTS'] !== '1') return;
      const dir = projectPath('docs', 'img');
      await mkdir(dir, { recursive: true });
      await page.screenshot({ path: path.join(dir, `${name}.png`) });
    },
    async close() {
      await browser.close().catch(() => undefined);
      await app.close();
    },
  };
}

/** Runs axe-core in the page; resolves to its violations (id and the first node's target). */
export async function axe(page: Page): Promise<{ id: string; help: string; target: string }[]> {
  // Evaluated through the DevTools protocol, which the page's CSP does not govern (an injected
  // <script> tag would be refused by script-src 'self', as it should be).
  await page.evaluate(await readFile(projectPath('node_modules', 'axe-core', 'axe.min.js'), 'utf8'));
  return page.evaluate(async () => {
    const w = window as unknown as {
      axe: { run: (ctx: Document, opts: object) => Promise<{ violations: { id: string; help: string; nodes: { target: string[] }[] }[] }> };
    };
    const r = await w.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, help: v.help, target: String(v.nodes[0]?.target ?? '') }));
  });
}

/** True when the page is wider than the window (a horizontal scroll bar). */
export function overflowsX(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);
}
