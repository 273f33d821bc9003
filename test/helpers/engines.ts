/**
 * The GGUF engine a test runs on, for the engine matrix. Text models run on llama-server wherever
 * it is built (the product's default, which CI builds) and on node-llama-cpp elsewhere; a
 * surface's test file runs on that default as it is, and again on node-llama-cpp through a wrapper
 * under test/backend-llama-cpp/surfaces/ that sets `LIA_TEST_BACKENDS` (which `startTestAppliance`
 * turns into the appliance's `backends`). Where the two engines legitimately differ, a test asks
 * {@link ggufEngine} and checks each one's behaviour (docs/backends.md, "What differs between the
 * engines"). A test of node-llama-cpp's own machinery (its runner processes, their threads and
 * crashes) starts its appliance with {@link ON_LLAMA_CPP}.
 *
 * @module
 */
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';

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
