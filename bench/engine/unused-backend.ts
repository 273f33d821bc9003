/**
 * The appliance's text figures with the backend-llama-server plugin enabled but unused, against
 * the same appliance with it disabled (`plugins: { 'backend-llama-server': false }`): two `lia
 * serve` processes side by side, each serving the same text GGUF (`--model`, as in run.ts; the
 * 135M one by default) on node-llama-cpp with the same threads, slots and context, so the only
 * difference is the plugin being loaded and its backend registered.
 *
 * Per round and per appliance, the order alternating between rounds: `--requests` streamed
 * `/api/generate` requests one after another (targets.ts: raw prompt, Ollama's default sampling,
 * `--tokens` tokens), of which the median single-stream decode tokens/s (first to last token) and
 * the median time to first token, taken on the client. A round's ratios are enabled ÷ disabled for
 * decode and disabled ÷ enabled for the time to first token (≥ 1.0: no slower with the plugin);
 * reported are the medians over the rounds and the smallest and largest round ratio.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/unused-backend.ts [--model 135m] [--rounds 6] [--requests 5] [--tokens 128] [--slots 4] [--context 512]`.
 * Prints the machine first and the table last, and writes `bench/results/unused-backend-<time>.json`.
 *
 * @module
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { saveResult } from '../lib/results.js';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { countConnections, resent } from '../lib/connections.js';
import { assertSameConfiguration, machineInfo, machineLine } from '../lib/machine.js';
import { median } from '../lib/stats.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { PROMPT } from './figures.js';
import { benchThreads } from './llama-server.js';
import { applianceGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '135m' },
    rounds: { type: 'string', default: '6' },
    requests: { type: 'string', default: '5' },
    tokens: { type: 'string', default: '128' },
    slots: { type: 'string', default: '4' },
    context: { type: 'string', default: '512' },
  },
});
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const TOKENS = Number(values.tokens);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

type Name = 'enabled' | 'disabled';
interface Figures {
  decode: number;
  ttft: number;
}

/** Medians of {@link REQUESTS} generations one after another. */
async function measure(app: ApplianceProcess): Promise<Figures> {
  const runs = [];
  for (let i = 0; i < REQUESTS; i++) runs.push(await applianceGenerate(app, app.dispatcher(), 'bench', PROMPT, TOKENS));
  const tokens = median(runs.map((s) => s.tokens));
  return { decode: ((tokens - 1) / median(runs.map((s) => s.decodeMs))) * 1000, ttft: median(runs.map((s) => s.ttftMs)) };
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await benchModelPath(values.model);
  const engine = { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } };
  const enabled = await startApplianceProcess({ plugins: { ...ENGINE_ONLY, engine } });
  const disabled = await startApplianceProcess({ plugins: { ...ENGINE_ONLY, engine, 'backend-llama-server': false } }).catch(async (err: unknown) => {
    await enabled.close();
    throw err;
  });
  const apps: Record<Name, ApplianceProcess> = { enabled, disabled };
  try {
    for (const app of Object.values(apps)) {
      await createBenchModel(app, 'bench', model);
      // Warm: the model's load and its first requests.
      for (let i = 0; i < 3; i++) await applianceGenerate(app, app.dispatcher(), 'bench', PROMPT, 16);
    }
    // The spare runner each appliance starts after a quiet second must land in no timing.
    await new Promise((resolve) => setTimeout(resolve, 4000));
    const contexts: Record<string, number | undefined> = {};
    for (const [name, app] of Object.entries(apps)) {
      const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; context_length?: number }[] };
      contexts[name] = ps.models.find((m) => m.name.startsWith('bench'))?.context_length;
    }
    assertSameConfiguration([{ name: 'context per slot', wanted: CONTEXT, sides: contexts }]);

    const connections = countConnections();
    connections.on = true;
    const rounds: Array<Record<Name, Figures> & { decodeRatio: number; ttftRatio: number }> = [];
    for (let r = 0; r < ROUNDS; r++) {
      const round = {} as Record<Name, Figures>;
      for (const name of (r % 2 === 0 ? ['enabled', 'disabled'] : ['disabled', 'enabled']) as Name[]) round[name] = await measure(apps[name]);
      const row = { ...round, decodeRatio: round.enabled.decode / round.disabled.decode, ttftRatio: round.disabled.ttft / round.enabled.ttft };
      rounds.push(row);
      console.error(
        `round ${r + 1}/${ROUNDS}: decode ${round.enabled.decode.toFixed(1)} / ${round.disabled.decode.toFixed(1)} tok/s (${row.decodeRatio.toFixed(3)}), ` +
          `TTFT ${round.enabled.ttft.toFixed(2)} / ${round.disabled.ttft.toFixed(2)} ms (${row.ttftRatio.toFixed(3)})`,
      );
    }
    connections.on = false;
    connections.stop();

    const summary = (key: 'decode' | 'ttft', ratio: 'decodeRatio' | 'ttftRatio') => {
      const ratios = rounds.map((x) => x[ratio]);
      return {
        enabled: median(rounds.map((x) => x.enabled[key])),
        disabled: median(rounds.map((x) => x.disabled[key])),
        ratio: median(ratios),
        min: Math.min(...ratios),
        max: Math.max(...ratios),
      };
    };
    const result = { decode: summary('decode', 'decodeRatio'), ttft: summary('ttft', 'ttftRatio') };
    console.log(
      `\n${machineLine(machine)}; load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} after the run`,
    );
    console.log(
      `${modelLabel(model)}, ${TOKENS} tokens per request, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT} context, ${ROUNDS} rounds × ${REQUESTS} requests per appliance`,
    );
    console.log(`${'figure'.padEnd(30)}${'enabled'.padStart(10)}${'disabled'.padStart(10)}${'ratio'.padStart(8)}   rounds`);
    for (const [label, x] of [
      ['single-stream decode (tok/s)', result.decode],
      ['time to first token (ms)', result.ttft],
    ] as const) {
      console.log(
        `${label.padEnd(30)}${x.enabled.toFixed(1).padStart(10)}${x.disabled.toFixed(1).padStart(10)}${x.ratio.toFixed(3).padStart(8)}   ${x.min.toFixed(3)}-${x.max.toFixed(3)}`,
      );
    }
    console.log('ratios: decode enabled ÷ disabled, TTFT disabled ÷ enabled (1.0: unchanged)');
    console.log(`connections opened while timing: ${JSON.stringify(connections.opened)}; requests sent again (timedPost): ${JSON.stringify(resent)}`);
    await saveResult('unused-backend', {
      model: modelLabel(model),
      machine,
      threads: THREADS,
      batchThreads: BATCH_THREADS,
      slots: SLOTS,
      context: CONTEXT,
      tokens: TOKENS,
      result,
      rounds,
    });
  } finally {
    await Promise.all(Object.values(apps).map((app) => app.close()));
  }
}

await main();
process.exit(0);
