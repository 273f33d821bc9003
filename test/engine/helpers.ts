/**
 * Shared setup of the engine's end-to-end tests: an appliance with only the plugins inference
 * needs, the official `ollama` client wired to its HTTPS URL, CA and key, and the runner processes
 * the engine started (for crash tests).
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { Ollama } from 'ollama';
import { fetch as undiciFetch } from 'undici';
import { ENGINE_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance, type TestAppliance, type TestApplianceOptions } from '../helpers/appliance.js';

export function startEngineAppliance(options: TestApplianceOptions = {}): Promise<TestAppliance> {
  return startTestAppliance({ ...options, plugins: { ...ENGINE_ONLY, ...options.plugins } });
}

/** The official ollama npm client, talking HTTPS to the appliance with its CA and Bearer key. */
export function ollamaClient(app: TestAppliance): Ollama {
  const dispatcher = app.dispatcher();
  return new Ollama({
    host: app.url,
    headers: { Authorization: `Bearer ${app.key}` },
    fetch: ((input: string | URL, init?: object) => undiciFetch(input, { ...init, dispatcher })) as unknown as typeof fetch,
  });
}

/** Process ids of the llama.cpp runners this test process started. */
export function runnerPids(): number[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)], { encoding: 'utf8' });
  } catch {
    return [];
  }
  return out
    .split('\n')
    .filter((l) => l.includes('runner/main'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

/** Reads an NDJSON response body into objects. */
export async function ndjson(res: { text(): Promise<string> }): Promise<Record<string, unknown>[]> {
  return (await res.text())
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
