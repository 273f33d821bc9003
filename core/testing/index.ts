/**
 * `lia/testing`: helpers for plugin authors to test their plugin against a real appliance.
 *
 * - {@link startTestAppliance} starts LIA in the test's process: HTTPS on an ephemeral port of
 *   127.0.0.1, a fresh data directory (so a fresh CA and master key), the default plugins with
 *   the test's entries merged over them, mDNS off. Its `fetch` trusts the generated CA and sends
 *   the master key.
 * - With `listen: false` the same appliance opens no socket (no HTTPS listener, no control
 *   socket) and its `fetch` goes through Fastify's `app.inject()`, answering the same WHATWG
 *   `Response` (status, headers, a body that streams as the route writes it). It starts faster and
 *   needs no port: the route tier (`*.route.test.ts`). What needs a real connection (TLS, idle
 *   connections, a client that disconnects, a client that takes a URL) needs the listener.
 * - {@link FAKE_BACKEND} enables the `fake-backend` plugin, an inference backend without a model
 *   (see `./fake-backend.ts`); {@link createFakeModel} stores a model it serves.
 *
 * It follows the plugin API version of `lia/plugin`: within one major, only additions.
 *
 * @example
 * ```js
 * import { fileURLToPath } from 'node:url'
 * import { startTestAppliance, FAKE_BACKEND, createFakeModel } from 'lia/testing'
 *
 * const app = await startTestAppliance({
 *   plugins: {
 *     'backend-llama-cpp': false,
 *     'backend-transformers': false,
 *     'fake-backend': FAKE_BACKEND,
 *     'my-plugin': { module: fileURLToPath(new URL('../index.js', import.meta.url)) },
 *   },
 * })
 * try {
 *   await createFakeModel(app, 'parrot', 'parrot says:')
 *   const res = await app.fetch('/api/generate', { method: 'POST', body: JSON.stringify({ model: 'parrot', prompt: 'hi', stream: false }) })
 *   // (await res.json()).response === 'parrot says: hi'
 * } finally {
 *   await app.close()
 * }
 * ```
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, fetch, Headers, type RequestInit, type Response } from 'undici';
import { injectFetch } from './inject-fetch.js';
import { loadConfig } from '../config/load.js';
import type { PluginEntry } from '../config/schema.js';
import { startAppliance, type Appliance } from '../main.js';
import type { Hooks } from '../plugin/hooks.js';

export { default as fakeBackend, fakeFormat, fakeInferenceBackend, FAKE_MEDIA_TYPE, SCRIPT_MARK, SPEECH_MARK, type FakeScript } from './fake-backend.js';
export { holdSpeech, VOICE_MARK } from './fake-voice.js';
import { VOICE_MARK } from './fake-voice.js';
import { SCRIPT_MARK, SPEECH_MARK, type FakeScript } from './fake-backend.js';
export type { PluginEntry };

/** The config entry that enables the `fake-backend` plugin: `plugins: { 'fake-backend': FAKE_BACKEND }`. */
export const FAKE_BACKEND: { readonly module: string } = Object.freeze({
  // The module beside this one, as it runs: the TypeScript source or the built JavaScript.
  module: fileURLToPath(new URL(`./fake-backend.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url)),
});

export interface TestApplianceOptions {
  /**
   * Plugin entries merged over the default configuration's, e.g. `{ webui: false }` or
   * `{ 'my-plugin': { module: '/path/to/index.js', options: {...} } }`. `host-network` defaults to
   * `{ options: { mdns: 'off' } }` so that tests do not announce themselves on the network.
   */
  plugins?: Record<string, PluginEntry>;
  /**
   * Environment for config settings and plugin options (`LIA_*`). `LIA_LOG_LEVEL` defaults to
   * `silent` (or to the `LIA_TEST_LOG_LEVEL` of the test's environment, to debug a test), and
   * `LIA_BACKENDS` to the `LIA_TEST_BACKENDS` of the test's environment, so that one test file
   * runs against another backend choice (`LIA_TEST_BACKENDS=gguf=llama-server`) unchanged.
   */
  env?: Record<string, string>;
  /** A data directory to use (kept on close); a fresh temporary one (removed on close) otherwise. */
  dataDir?: string;
  /** Keep the temporary data directory on close. Defaults to false. */
  keepDataDir?: boolean;
  /** The address to listen on. Defaults to `127.0.0.1`; `::` (the appliance's default) is dual stack. */
  host?: string;
  /**
   * Listen on HTTPS (and open the control socket). With false, nothing listens and `fetch`
   * injects into the app (see the module comment); `url` is then empty and `port` 0. Defaults
   * to true.
   */
  listen?: boolean;
}

export interface TestAppliance {
  /** `https://localhost:<port>`; empty when the appliance does not listen. */
  url: string;
  port: number;
  /** The master key (holds every scope); empty when `auth-api-key` is disabled. */
  key: string;
  /** PEM of the appliance's root CA, as `/system/ca-cert` serves it. */
  ca: string;
  dataDir: string;
  /** The hooks of the running appliance (registries, sole hooks, extensions). */
  hooks: Hooks;
  /** The running appliance: its Fastify `app` (for `app.inject`), its loaded plugins. */
  appliance: Appliance;
  /** Console text so far: the boot banner, key rotation notices. */
  readonly console: string;
  /** An undici Agent trusting the CA, for clients that take a dispatcher or a custom fetch. */
  dispatcher(): Agent;
  /**
   * `fetch` against the appliance, trusting its CA, or through `app.inject()` when it does not
   * listen; sends the master key unless `auth: false`.
   */
  fetch(pathname: string, init?: RequestInit & { auth?: boolean }): Promise<Response>;
  /** Stops the appliance and removes the temporary data directory. Safe to call twice. */
  close(): Promise<void>;
}

/** Starts an appliance for a test (see the module comment). Close it in the test's teardown. */
export async function startTestAppliance(options: TestApplianceOptions = {}): Promise<TestAppliance> {
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'lia-test-')));
  const backends = process.env['LIA_TEST_BACKENDS'];
  const env = { LIA_LOG_LEVEL: process.env['LIA_TEST_LOG_LEVEL'] ?? 'silent', ...(backends ? { LIA_BACKENDS: backends } : {}), ...options.env };
  const base = await loadConfig({ env, cwd: dataDir, flags: { host: options.host ?? '127.0.0.1', port: '0', dataDir } });
  const config = Object.freeze({
    ...base,
    plugins: Object.freeze({ ...base.plugins, 'host-network': { options: { mdns: 'off' } }, ...options.plugins }),
  });
  let consoleText = '';
  const listen = options.listen ?? true;
  const appliance = await startAppliance(config, {
    console: (t) => (consoleText += t),
    logDestination: null,
    env: { ...process.env, ...env },
    listen,
  });
  const ca = appliance.hooks.tls.get().rootCertificatePem();
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8').catch(() => '')).trim();
  const agent = new Agent({ connect: { ca }, bodyTimeout: 0, headersTimeout: 0 });
  const url = listen ? `https://localhost:${appliance.port}` : '';
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
      if (auth && key && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
      return listen ? fetch(url + pathname, { ...rest, headers, dispatcher: agent }) : injectFetch(appliance.app, pathname, { ...rest, headers });
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

/** Uploads bytes as a blob (`POST /api/blobs/sha256:…`) and returns its digest. Throws on failure. */
export async function uploadBlob(app: Pick<TestAppliance, 'fetch'>, bytes: string | Uint8Array): Promise<string> {
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const res = await app.fetch(`/api/blobs/${digest}`, { method: 'POST', body: bytes });
  if (res.status !== 201 && res.status !== 200) throw new Error(`uploading ${digest}: HTTP ${res.status} ${await res.text()}`);
  return digest;
}

/**
 * Creates a model of the `fake` format (needs {@link FAKE_BACKEND} enabled): uploads `prefix` as
 * its one file and calls `/api/create`. Its answers are `prefix` followed by the prompt.
 * Defaults: `prefix` = `"fake:"`. Throws with the server's answer on failure.
 */
export async function createFakeModel(app: Pick<TestAppliance, 'fetch'>, name: string, prefix = 'fake:'): Promise<void> {
  const digest = await uploadBlob(app, prefix);
  const res = await app.fetch('/api/create', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: name, files: { 'model.fake': digest }, stream: false }),
  });
  if (res.status !== 200) throw new Error(`creating the fake model "${name}": HTTP ${res.status} ${await res.text()}`);
}

/**
 * Creates a scripted fake model (needs {@link FAKE_BACKEND} enabled): offered the script's tools,
 * it calls them; once a tool result came back, it answers `script.answer` with `{{result}}`
 * replaced by that result. A test drives an agent's tool loop with it. Throws on failure.
 *
 * @example
 * ```js
 * await createScriptedModel(app, 'agent', { toolCalls: [{ name: 'shell', arguments: { command: 'ls' } }], answer: 'saw: {{result}}' })
 * ```
 */
export async function createScriptedModel(app: Pick<TestAppliance, 'fetch'>, name: string, script: FakeScript): Promise<void> {
  await createFakeModel(app, name, `${SCRIPT_MARK}\n${JSON.stringify(script)}`);
}

/**
 * Creates a fake speech model (needs {@link FAKE_BACKEND} enabled): it has the `transcription`
 * capability, takes windows of `windowSeconds` (default 30) and answers each with its audio read
 * out, one word per 100 ms (the block's RMS level in thousandths), timed by its block. Throws on
 * failure.
 */
export async function createSpeechModel(app: Pick<TestAppliance, 'fetch'>, name: string, windowSeconds = 30): Promise<void> {
  await createFakeModel(app, name, `${SPEECH_MARK} ${windowSeconds}`);
}

/**
 * Creates a fake text-to-speech model (needs {@link FAKE_BACKEND} enabled): it has the `speech`
 * capability and the given voices (`default` when none), and speaks each character as 10 ms of
 * a 400 Hz tone at 16 kHz, amplitude 0.1 for the first voice, 0.2 for the second, and so on.
 * With {@link holdSpeech}, a sentence with the word `HOLD` waits. Throws on failure.
 */
export async function createVoiceModel(app: Pick<TestAppliance, 'fetch'>, name: string, voices: string[] = []): Promise<void> {
  await createFakeModel(app, name, [VOICE_MARK, ...voices].join(' '));
}
