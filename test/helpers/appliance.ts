/**
 * Starts a real appliance for a test: HTTPS on an ephemeral port of 127.0.0.1, a fresh data
 * directory (so a fresh CA and master key), and the plugins of the default config unless the
 * test overrides them. The returned `fetch` trusts the generated CA (no `-k`) and sends the key.
 *
 * @example
 * ```ts
 * const app = await startTestAppliance()
 * t.teardown(app.close)
 * const res = await app.fetch('/api/tags')
 * ```
 *
 * @module
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch, Headers, type RequestInit, type Response } from 'undici';
import { loadConfig } from '../../core/config/load.js';
import type { PluginEntry } from '../../core/config/schema.js';
import { startAppliance, type Appliance } from '../../core/main.js';
import type { Hooks } from '../../core/plugin/hooks.js';

export interface TestApplianceOptions {
  /** Plugin entries merged over the defaults, e.g. `{ webui: false }`. */
  plugins?: Record<string, PluginEntry>;
  /** Extra environment for config and plugin options (`LIA_*`). */
  env?: Record<string, string>;
  /** Reuse a data directory (restart tests); a fresh temp one otherwise. */
  dataDir?: string;
  /** Keep the data directory on close. Defaults to false for temp ones. */
  keepDataDir?: boolean;
}

export interface TestAppliance {
  url: string;
  port: number;
  /** The master key read from the key file. */
  key: string;
  /** PEM of the root CA, as `/system/ca-cert` serves it. */
  ca: string;
  dataDir: string;
  hooks: Hooks;
  appliance: Appliance;
  /** Console text so far: the boot banner, rotation notices. */
  readonly console: string;
  /** An undici Agent trusting the CA (for the openai/ollama clients' fetch). */
  dispatcher(): Agent;
  /** fetch against the appliance, trusting the CA; adds the key unless `auth: false`. */
  fetch(pathname: string, init?: RequestInit & { auth?: boolean }): Promise<Response>;
  close(): Promise<void>;
}

export async function startTestAppliance(options: TestApplianceOptions = {}): Promise<TestAppliance> {
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'lia-test-')));
  const env = { LIA_LOG_LEVEL: process.env['LIA_TEST_LOG_LEVEL'] ?? 'silent', ...options.env };
  const base = await loadConfig({ env, cwd: dataDir, flags: { host: '127.0.0.1', port: '0', dataDir } });
  const config = Object.freeze({
    ...base,
    plugins: Object.freeze({ ...base.plugins, ...options.plugins }),
  });
  let consoleText = '';
  const appliance = await startAppliance(config, { console: (t) => (consoleText += t), logDestination: null, env: { ...process.env, ...env } });
  const ca = appliance.hooks.tls.get().rootCertificatePem();
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8').catch(() => '')).trim();
  const agent = new Agent({ connect: { ca }, bodyTimeout: 0, headersTimeout: 0 });
  const url = `https://localhost:${appliance.port}`;
  let closed = false;
  return {
    url,
    port: appliance.port,
    key,
    ca,
    dataDir,
    hooks: appliance.hooks,
    appliance,
    get console() {
      return consoleText;
    },
    dispatcher: () => agent,
    fetch(pathname, init = {}) {
      const { auth = true, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (auth && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
      return fetch(url + pathname, { ...rest, headers, dispatcher: agent });
    },
    async close() {
      if (closed) return;
      closed = true;
      await appliance.close();
      await agent.close();
      if (!options.dataDir && !options.keepDataDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
