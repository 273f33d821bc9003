/**
 * The shared setup of the `/v1/` end-to-end tests: a real appliance with the fixture models
 * created through the store's HTTPS API, and the official `openai` client pointed at it whose
 * every response and stream chunk is validated against the OpenAI schemas on the way in.
 *
 * @module
 */
import OpenAI from 'openai';
import type { Test } from 'tap';
import type { PluginEntry } from '../../core/config/schema.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { schemaCheckedFetch, type CheckedFetch } from '../helpers/openai-schema.js';

/** A running appliance and a schema-checking `openai` client for it. */
export interface OpenAIFixture {
  app: TestAppliance;
  client: OpenAI;
  /** A client with another API key (same schema recorder). */
  clientWithKey(apiKey: string): OpenAI;
  /**
   * Asserts that every payload received since the last call conformed to the OpenAI schemas,
   * and that there was at least `min` of them.
   */
  conforms(t: Test, min?: number): Promise<void>;
}

/** Plugins the `/v1/` tests do not need. */
const UNUSED = { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } as const;

/**
 * Starts an appliance (plugin entries merged, `env` for `LIA_*` settings) holding `models` (name →
 * fixture); closes it when `t` ends.
 */
export async function openaiFixture(
  t: Test,
  models: Record<string, string>,
  plugins: Record<string, PluginEntry> = {},
  env: Record<string, string> = {},
): Promise<OpenAIFixture> {
  const app = await startTestAppliance({ plugins: { ...UNUSED, ...plugins }, env });
  t.teardown(() => app.close());
  for (const [name, file] of Object.entries(models)) await createModel(app, name, file);
  const checked: CheckedFetch = schemaCheckedFetch(app.dispatcher());
  const make = (apiKey: string) => new OpenAI({ baseURL: `${app.url}/v1`, apiKey, fetch: checked.fetch, maxRetries: 0 });
  return {
    app,
    client: make(app.key),
    clientWithKey: make,
    async conforms(t, min = 1) {
      const { failures, checked: n } = await checked.drain();
      t.same(failures, [], 'every /v1/ body and chunk conforms to the OpenAI schemas');
      t.ok(n >= min, `${n} payloads validated (at least ${min})`);
    },
  };
}
