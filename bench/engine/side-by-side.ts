/**
 * The appliance and llama-server run directly, started with the same model, threads, slots and
 * context, the model created in the appliance as `bench` and both answering: the setup of the
 * benchmarks that time one request at a time against the other (first-token.ts, front-cost.ts).
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { createBenchModel } from '../models/models.js';
import type { GpuBackendKind } from '../../plugins/backend-llama-server/devices.js';
import { benchThreads, buildLlamaServer, checkSameConfiguration, gpuSides, startLlamaServer } from './llama-server.js';

export interface SideBySide {
  app: ApplianceProcess;
  /** llama-server's process and its loopback port. */
  server: ChildProcess;
  port: number;
  threads: number;
  batchThreads: number;
  /** Fails loudly unless both sides run the context and slots asked for; call once both have answered. */
  check(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts both sides for the GGUF at `model`: `slots` × `context` tokens each, the appliance's
 * GGUF text on `engine` (`llama-server` or `llama-cpp`), llama-server on `port`, both on GPU back
 * end `gpu` when one is named (`gpuSides`).
 */
export async function startSideBySide(opts: {
  model: string;
  port: number;
  slots: number;
  context: number;
  engine: string;
  gpu?: GpuBackendKind | null;
}): Promise<SideBySide> {
  const { threads, batchThreads } = benchThreads();
  const binary = await buildLlamaServer();
  const gpu = gpuSides(opts.gpu ?? null, binary);
  const server = await startLlamaServer(binary, {
    model: opts.model,
    port: opts.port,
    threads,
    batchThreads,
    parallel: opts.slots,
    contextPerSlot: opts.context,
    args: gpu.args,
  });
  let app: ApplianceProcess;
  try {
    app = await startApplianceProcess({
      backends: { gguf: opts.engine },
      plugins: {
        ...ENGINE_ONLY,
        ...gpu.plugins,
        engine: { options: { numParallel: opts.slots, contextLength: opts.context, threads, batchThreads, keepAlive: -1 } },
      },
    });
  } catch (err) {
    server.kill();
    throw err;
  }
  const close = async () => {
    await app.close();
    server.kill();
  };
  try {
    await createBenchModel(app, 'bench', opts.model);
  } catch (err) {
    await close();
    throw err;
  }
  return {
    app,
    server,
    port: opts.port,
    threads,
    batchThreads,
    check: () => checkSameConfiguration(app, opts.port, { context: opts.context, slots: opts.slots }),
    close,
  };
}
