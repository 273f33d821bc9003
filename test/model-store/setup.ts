/**
 * Shared setup of the model-store tests: an appliance with only the plugins the store needs
 * (TLS, keys, the store, the engine whose `backends` hook holds the format handlers, and the
 * backends whose handlers recognise and describe GGUF and ONNX models; no spare llama.cpp runner,
 * and no route that generates is asked).
 *
 * @module
 */
import type { PluginEntry } from '../../core/config/schema.js';
import { startTestAppliance, type TestAppliance, type TestApplianceOptions } from '../helpers/appliance.js';

/** Plugins switched off in these tests. */
export const STORE_ONLY: Record<string, PluginEntry> = {
  'host-network': false,
  'host-gpu': false,
  'host-services': false,
  'backend-llama-cpp': { options: { prewarm: false } },
  'api-openai': false,
  'api-anthropic': false,
  webui: false,
};

/** Starts an appliance with the store only; `storeOptions` are the model-store plugin's options. */
export function startStore(storeOptions: Record<string, unknown> = {}, extra: TestApplianceOptions = {}): Promise<TestAppliance> {
  return startTestAppliance({ ...extra, plugins: { ...STORE_ONLY, 'model-store': { options: storeOptions }, ...extra.plugins } });
}

/** Sends JSON and returns status and parsed body (or text). */
export async function call(
  app: TestAppliance,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: any; text: string; type: string }> {
  const res = await app.fetch(path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, body: parsed, text, type: res.headers.get('content-type') ?? '' };
}

/** Parses an NDJSON body into objects. */
export function ndjson(text: string): any[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}
