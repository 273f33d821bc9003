/**
 * Decode speed, time to first token and the aggregate rate of 4 concurrent streams of this checkout against another one (the anchor: an
 * earlier commit, built, with `node_modules`), in one run: two `lia serve` processes side by side
 * serving the same text GGUF with the same threads, slots and context, rounds alternating which
 * goes first. Ratios are this ÷ anchor for the rates and anchor ÷ this for the first token (≥ 1.0:
 * no slower), the medians over the rounds with the smallest and largest round.
 *
 *   git worktree add /tmp/lia-anchor <commit> && (cd /tmp/lia-anchor && npm install && npm run build)
 *   node --conditions=lia-source --import tsx bench/engine/anchor.ts /tmp/lia-anchor [--rounds 6] [--model 135m] [--engine llama-cpp|llama-server]
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { cachedBinary } from '../../plugins/backend-llama-server/build.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { median } from '../lib/stats.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { PROMPT } from './figures.js';
import { benchThreads } from './llama-server.js';
import { applianceGenerate } from './targets.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string', default: '135m' },
    rounds: { type: 'string', default: '6' },
    requests: { type: 'string', default: '5' },
    tokens: { type: 'string', default: '128' },
    engine: { type: 'string' },
  },
});
const anchorRoot = positionals[0];
if (!anchorRoot) {
  console.error('usage: node --conditions=lia-source --import tsx bench/engine/anchor.ts ANCHOR_CHECKOUT [--rounds 6]');
  process.exit(2);
}
const { threads, batchThreads } = benchThreads();
const engine = { options: { numParallel: 4, contextLength: 512, threads, batchThreads, keepAlive: -1 } };
// `--engine llama-cpp|llama-server` pins the GGUF engine on both sides (`backends.gguf`); without it each runs its default.
const backends = values.engine ? { backends: { gguf: `backend-${values.engine}` } } : {};
// The anchor runs this checkout's llama-server binary (same llama.cpp release; its own build may
// predate fixes this CPU needs), so the ratio measures the appliance's code, not two builds.
const binary = await cachedBinary();
const anchorEnv: Record<string, string> = binary ? { LIA_LLAMA_SERVER: binary } : {};

/** The command lines of a process's descendants (Linux `/proc`). */
function descendants(pid: number): string[] {
  const children = (p: number): number[] => {
    try {
      return readFileSync(`/proc/${p}/task/${p}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch {
      return [];
    }
  };
  const out: string[] = [];
  const queue = children(pid);
  while (queue.length > 0) {
    const p = queue.shift()!;
    try {
      out.push(readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' '));
    } catch {
      continue;
    }
    queue.push(...children(p));
  }
  return out;
}

interface Got {
  decode: number;
  ttft: number;
  /** All tokens of 4 concurrent streams over the wave's wall time (tok/s). */
  streams: number;
}

async function measure(app: ApplianceProcess): Promise<Got> {
  const runs = [];
  for (let i = 0; i < Number(values.requests); i++) runs.push(await applianceGenerate(app, app.dispatcher(), 'bench', PROMPT, Number(values.tokens)));
  const t0 = performance.now();
  const wave = await Promise.all(Array.from({ length: 4 }, () => applianceGenerate(app, app.dispatcher(), 'bench', PROMPT, Number(values.tokens))));
  const wall = Math.max(...wave.map((r) => r.endMs)) - t0;
  return {
    decode: ((median(runs.map((r) => r.tokens)) - 1) / median(runs.map((r) => r.decodeMs))) * 1000,
    ttft: median(runs.map((r) => r.ttftMs)),
    streams: (wave.reduce((sum, r) => sum + r.tokens, 0) / wall) * 1000,
  };
}

const machine = machineInfo();
console.log(machineLine(machine));
const model = await benchModelPath(values.model);
// The anchor's configuration schema may not know newer plugins: the same engine-only set on both.
const plugins = Object.fromEntries(Object.entries(ENGINE_ONLY).filter(([name]) => !name.startsWith('backend-llama-server')));
const sides = {
  this: await startApplianceProcess({ ...backends, plugins: { ...plugins, engine } }),
  anchor: await startApplianceProcess({ ...backends, plugins: { ...plugins, engine } }, anchorEnv, anchorRoot),
};
try {
  for (const app of Object.values(sides)) {
    await createBenchModel(app, 'bench', model);
    for (let i = 0; i < 3; i++) await applianceGenerate(app, app.dispatcher(), 'bench', PROMPT, 16);
  }
  // Both sides must run the same engine, or the ratio compares engines, not checkouts (the
  // anchor's /api/ps may not name it: a llama-server process under the appliance's does).
  const engines = Object.values(sides).map((app) => (descendants(app.pid).some((cmd) => cmd.includes('llama-server')) ? 'llama-server' : 'llama-cpp'));
  console.log(`engine: this ${engines[0]}, anchor ${engines[1]}`);
  if (engines[0] !== engines[1]) throw new Error(`the two checkouts run different engines (${engines.join(' vs ')}): pass --engine`);
  await new Promise((resolve) => setTimeout(resolve, 4000));
  const decode: number[] = [];
  const ttft: number[] = [];
  const streams: number[] = [];
  for (let r = 0; r < Number(values.rounds); r++) {
    const order = r % 2 === 0 ? (['this', 'anchor'] as const) : (['anchor', 'this'] as const);
    const got: Record<'this' | 'anchor', Got> = { this: { decode: 0, ttft: 0, streams: 0 }, anchor: { decode: 0, ttft: 0, streams: 0 } };
    for (const name of order) got[name] = await measure(sides[name]);
    decode.push(got.this.decode / got.anchor.decode);
    ttft.push(got.anchor.ttft / got.this.ttft);
    streams.push(got.this.streams / got.anchor.streams);
    console.error(
      `round ${r + 1}: decode ${got.this.decode.toFixed(1)} / ${got.anchor.decode.toFixed(1)} tok/s, TTFT ${got.this.ttft.toFixed(1)} / ${got.anchor.ttft.toFixed(1)} ms, ` +
        `4 streams ${got.this.streams.toFixed(1)} / ${got.anchor.streams.toFixed(1)} tok/s`,
    );
  }
  const line = (label: string, xs: number[]) =>
    `${label.padEnd(28)}${median(xs).toFixed(3)}   rounds ${Math.min(...xs).toFixed(3)}-${Math.max(...xs).toFixed(3)}`;
  console.log(`\n${modelLabel(model)}, threads ${threads} (batches ${batchThreads}), 4 slots × 512, this checkout against ${anchorRoot}`);
  console.log(line('decode, this ÷ anchor', decode));
  console.log(line('first token, anchor ÷ this', ttft));
  console.log(line('4 streams, this ÷ anchor', streams));
} finally {
  await Promise.all(Object.values(sides).map((s) => s.close()));
}
process.exit(0);
