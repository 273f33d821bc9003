/**
 * The GGUF engine a test runs on, for the engine matrix. Text models run on llama-server wherever
 * it is built (the product's default, which CI builds) and on node-llama-cpp elsewhere; a
 * surface's test file runs on that default as it is, and again on node-llama-cpp through a wrapper
 * under test/backend-llama-cpp/surfaces/ that sets `LIA_TEST_BACKENDS` (which `startTestAppliance`
 * turns into the appliance's `backends`). A surface test is one table of cases for both engines;
 * where the two legitimately differ, it names the row of docs/backends.md's "What differs between
 * the engines" with {@link engineDifference}, which fails once that row is gone, rather than
 * branching on {@link ggufEngine}. A test of node-llama-cpp's own machinery (its runner processes, their threads and
 * crashes) starts its appliance with {@link ON_LLAMA_CPP}.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import type { TestAppliance } from './appliance.js';

const built = (await cachedBinary()) !== null;

/** The engine GGUF text models run on in this test: `LIA_TEST_BACKENDS`'s choice, else the machine's default. */
export function ggufEngine(): 'llama-cpp' | 'llama-server' {
  const chosen = /(?:^|,)gguf=(?:backend-)?(llama-server|llama-cpp)(?:,|$)/.exec(process.env['LIA_TEST_BACKENDS'] ?? '')?.[1];
  return (chosen as 'llama-cpp' | 'llama-server' | undefined) ?? (built ? 'llama-server' : 'llama-cpp');
}

/** The environment of an appliance whose GGUF models all run on node-llama-cpp. */
export const ON_LLAMA_CPP = { LIA_BACKENDS: 'gguf=llama-cpp' } as const;

/** Runs a test module (`load` imports it) with GGUF models on node-llama-cpp. */
export async function onLlamaCpp(load: () => Promise<unknown>): Promise<void> {
  process.env['LIA_TEST_BACKENDS'] = 'gguf=llama-cpp';
  await load();
}

/** Fails a test file that needs llama-server, with the command that builds it, when it is not built. */
export function requireLlamaServer(): void {
  if (!built) throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
}

/** The rows of docs/backends.md's "What differs between the engines", by their first cell. */
const differences = (() => {
  const doc = readFileSync(new URL('../../docs/backends.md', import.meta.url), 'utf8');
  const table = doc.slice(doc.indexOf('### What differs between the engines')).split('\n## ')[0]!;
  return new Set([...table.matchAll(/^\| ([^|]+?) \|/gm)].map((m) => m[1]!));
})();

/**
 * What this test's engine gives for a difference the docs list: `row` is the first cell of its row
 * in docs/backends.md's "What differs between the engines" (a row that is gone fails the test:
 * the engines are meant to agree there now), `values` each engine's.
 */
export function engineDifference<T>(row: string, values: Record<'llama-cpp' | 'llama-server', T>): T {
  if (!differences.has(row)) throw new Error(`docs/backends.md lists no difference "${row}" between the engines`);
  return values[ggufEngine()];
}

/** The process id of the llama-server that serves `model` (`name:latest`) in `app`; throws when none does. */
export function llamaServerPid(app: TestAppliance, model: string): number {
  const backend = app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-server') as LlamaServerBackend | undefined;
  const pid = backend?.processes().find((p) => p.model === `${model}:latest`)?.pid;
  if (!pid) throw new Error(`no llama-server serves ${model}`);
  return pid;
}

/** The command line of the llama-server serving `model`, as a lookup of an option's value (`--device` → `Vulkan0`). */
export async function llamaServerArgs(app: TestAppliance, model: string): Promise<(name: string) => string | undefined> {
  const args = (await readFile(`/proc/${llamaServerPid(app, model)}/cmdline`, 'utf8')).split('\0');
  return (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
}
