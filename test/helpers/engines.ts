/**
 * The GGUF engine a test runs on, for the engine matrix: a surface's test file runs as it is on
 * node-llama-cpp (backend-llama-cpp, the default for text), and again with GGUF models on
 * llama-server through a wrapper under test/backend-llama-server/surfaces/ that sets
 * `LIA_TEST_BACKENDS` (which `startTestAppliance` turns into the appliance's `backends`). Where the
 * two engines legitimately differ, a test asks {@link ggufEngine} and checks each one's behaviour
 * (docs/backends.md, "What differs between the engines").
 *
 * @module
 */
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';

/** `llama-server` when the test's environment gives it GGUF models, else `llama-cpp`. */
export function ggufEngine(): 'llama-cpp' | 'llama-server' {
  return /(^|,)gguf=(backend-)?llama-server(,|$)/.test(process.env['LIA_TEST_BACKENDS'] ?? '') ? 'llama-server' : 'llama-cpp';
}

/** Runs a test module (`load` imports it) with GGUF models on llama-server; fails clearly when it is not built. */
export async function onLlamaServer(load: () => Promise<unknown>): Promise<void> {
  if (!(await cachedBinary())) {
    throw new Error('llama-server is not built: run `lia engine build` (or `node bin/lia.js engine build`; .ci/run does it once per run)');
  }
  process.env['LIA_TEST_BACKENDS'] = 'gguf=llama-server';
  await load();
}
