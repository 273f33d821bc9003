/**
 * Time to first token, with more samples than `run.ts` takes (5): `--pairs` requests to the
 * appliance and to llama-server run directly (same model, threads, slots, context and sampling,
 * the same cached prompt), one after the other, the order alternating, so that both see the same
 * machine. Prints the medians, the ratio llama-server ÷ appliance (≥ 1: the appliance answers as
 * soon), the spread of each side (interquartile range over median) and the decode time per token.
 *
 * The appliance is spoken to as clients do (HTTPS, a key, `/api/generate` with a raw prompt);
 * llama-server over plain HTTP on loopback (`/completion`), which is what its users get.
 *
 * `--gpu vulkan|cuda` puts both on that back end's first device (`gpuSides` in ./llama-server.ts).
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/first-token.ts [--model 135m|1b-q4_0|FILE.gguf] [--pairs 40] [--tokens 16] [--engine llama-server|llama-cpp] [--gpu cpu|vulkan|cuda]`.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import type { GpuBackendKind } from '../../plugins/backend-llama-server/devices.js';
import { keepAlivePool } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median, spread } from '../lib/stats.js';
import { benchModelPath, modelLabel } from '../models/models.js';
import { PROMPT } from './figures.js';
import { startSideBySide } from './side-by-side.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '135m' },
    pairs: { type: 'string', default: '40' },
    tokens: { type: 'string', default: '16' },
    slots: { type: 'string', default: '16' },
    context: { type: 'string', default: '1024' },
    port: { type: 'string', default: '18390' },
    engine: { type: 'string', default: 'llama-server' },
    gpu: { type: 'string', default: 'cpu' },
  },
});
if (!['cpu', 'vulkan', 'cuda'].includes(values.gpu)) throw new Error(`--gpu ${values.gpu}: cpu, vulkan or cuda`);
const GPU = values.gpu === 'cpu' ? null : (values.gpu as GpuBackendKind);
const PAIRS = Number(values.pairs);
const TOKENS = Number(values.tokens);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await benchModelPath(values.model);
  const both = await startSideBySide({ model, port: Number(values.port), slots: SLOTS, context: CONTEXT, engine: values.engine, gpu: GPU });
  const { app, port, threads, batchThreads } = both;
  try {
    const agent = app.dispatcher();
    const plain = keepAlivePool(`http://127.0.0.1:${port}`);
    const appliance = () => applianceGenerate(app, agent, 'bench', PROMPT, TOKENS);
    const direct = () => llamaServerGenerate(`http://127.0.0.1:${port}`, plain, PROMPT, TOKENS);
    for (let i = 0; i < 5; i++) {
      await appliance();
      await direct();
    }
    await both.check();
    if (GPU) {
      const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; size_vram: number }[] };
      const vram = ps.models.find((m) => m.name.startsWith('bench'))?.size_vram ?? 0;
      if (vram <= 0) throw new Error(`--gpu ${GPU}: the appliance did not place the model on the device (size_vram 0)`);
    }
    const sides = { appliance: { ttft: [] as number[], perToken: [] as number[] }, 'llama-server': { ttft: [] as number[], perToken: [] as number[] } };
    for (let i = 0; i < PAIRS; i++) {
      const order = i % 2 === 0 ? (['appliance', 'llama-server'] as const) : (['llama-server', 'appliance'] as const);
      for (const name of order) {
        const s = await (name === 'appliance' ? appliance() : direct());
        sides[name].ttft.push(s.ttftMs);
        sides[name].perToken.push(s.decodeMs / Math.max(1, s.tokens - 1));
      }
    }
    const a = median(sides.appliance.ttft);
    const l = median(sides['llama-server'].ttft);
    const summary = {
      model: modelLabel(values.model),
      engine: values.engine,
      gpu: values.gpu,
      pairs: PAIRS,
      firstTokenMs: { appliance: a, 'llama-server': l },
      ratio: l / a,
      spread: { appliance: spread(sides.appliance.ttft), 'llama-server': spread(sides['llama-server'].ttft) },
      perTokenMs: { appliance: median(sides.appliance.perToken), 'llama-server': median(sides['llama-server'].perToken) },
    };
    console.log(
      `first token: appliance ${a.toFixed(2)} ms, llama-server ${l.toFixed(2)} ms, ratio ${summary.ratio.toFixed(3)} ` +
        `(spread ${(summary.spread.appliance * 100).toFixed(0)} % / ${(summary.spread['llama-server'] * 100).toFixed(0)} %); ` +
        `per token ${summary.perTokenMs.appliance.toFixed(2)} / ${summary.perTokenMs['llama-server'].toFixed(2)} ms`,
    );
    console.log(await saveResult('first-token', { machine, threads, batchThreads, slots: SLOTS, context: CONTEXT, ...summary, samples: sides }));
  } finally {
    await both.close();
  }
}

await main();
