/**
 * Speculative decoding (issue 43, item 2): one greedy stream of bench-random-135m in the appliance
 * and in a bare llama-server started with the same speculation flags, model, threads, slots and
 * context, for each case:
 *
 * - `none`: no speculation (the baseline of both sides);
 * - `draft`: llama-2-tiny-random as the draft (the same Llama-2 vocabulary, 1 layer: a cheap
 *   draft whose random weights rarely agree with the model's, so this measures the cost of
 *   drafting more than its gain);
 * - `self`: the model as its own draft (every drafted token accepted: the ceiling of acceptance,
 *   each step paying for the draft's decodes too);
 * - `ngram`: n-gram lookup on a prompt the answer repeats (a text, then its start again).
 *
 * The appliance holds one model per case (`bench-<case>`, made with `parameters`: `draft_model`,
 * `draft_ngram`, `draft_num_predict`); llama-server gets `--spec-type draft-simple
 * --spec-draft-model ... --spec-draft-n-max N --spec-draft-n-min 0` or `--spec-type ngram-simple`,
 * and its batches run on the small-batch thread count as the appliance's do under speculation.
 *
 * Figures per case: decode rate (tokens per second after the first), median of `--requests` per
 * repetition on each side, interleaved; the ratio is appliance ÷ llama-server (≥ 1: the appliance
 * is at least as fast), the median of the per-repetition ratios with their range; each side's
 * speed-up over its own `none`; and the drafted and accepted tokens the appliance reported.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/speculative.ts [--reps 3] [--requests 5] [--tokens 96] [--draft 3]`
 * (the appliance runs from dist/: `npm run build` first). Writes `bench/results/speculative-<time>.json`.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fixture } from '../../test/helpers/fixtures.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';
import { createBenchModel } from '../models/models.js';
import type { Stream } from './figures.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from './llama-server.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '3' },
    requests: { type: 'string', default: '5' },
    tokens: { type: 'string', default: '96' },
    draft: { type: 'string', default: '3' },
    context: { type: 'string', default: '1024' },
    port: { type: 'string', default: '18971' },
    cases: { type: 'string', default: 'none,draft,self,ngram' },
  },
});
const REPS = Number(values.reps);
const REQUESTS = Number(values.requests);
const TOKENS = Number(values.tokens);
const DRAFT = Number(values.draft);
const CONTEXT = Number(values.context);
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();
const MODEL = fixture('gguf/bench-random-135m-q4_0.gguf');
const SMALL = fixture('gguf/llama-2-tiny-random.gguf');
const TEXT = 'The quick brown fox jumps over the lazy dog, and then it runs into the forest where the trees are tall and the river is cold.';

interface Case {
  name: string;
  /** The appliance model's parameters. */
  parameters: Record<string, unknown>;
  /** llama-server's speculation flags. */
  args: string[];
  prompt: string;
}

const CASES: Case[] = [
  { name: 'none', parameters: {}, args: [], prompt: TEXT },
  {
    name: 'draft',
    parameters: { draft_model: 'bench-small', draft_num_predict: DRAFT },
    args: ['--spec-type', 'draft-simple', '--spec-draft-model', SMALL, '--spec-draft-n-max', String(DRAFT), '--spec-draft-n-min', '0', '--spec-draft-ngl', '0'],
    prompt: TEXT,
  },
  {
    name: 'self',
    parameters: { draft_model: 'bench-none', draft_num_predict: DRAFT },
    args: ['--spec-type', 'draft-simple', '--spec-draft-model', MODEL, '--spec-draft-n-max', String(DRAFT), '--spec-draft-n-min', '0', '--spec-draft-ngl', '0'],
    prompt: TEXT,
  },
  {
    name: 'ngram',
    parameters: { draft_ngram: 2, draft_num_predict: DRAFT },
    args: ['--spec-type', 'ngram-simple', '--spec-ngram-simple-size-n', '2', '--spec-ngram-simple-size-m', String(DRAFT)],
    prompt: `${TEXT}\n${TEXT}\n${TEXT.slice(0, 40)}`,
  },
].filter((c) => values.cases.split(',').includes(c.name));

/** Greedy decoding on both sides (the rest of the benchmarks' sampling then does not matter). */
const GREEDY = { temperature: 0, repeat_penalty: 1 };
const applianceStream = (app: ApplianceProcess, dispatcher: ReturnType<ApplianceProcess['dispatcher']>, model: string, prompt: string) =>
  applianceGenerate(app, dispatcher, model, prompt, TOKENS, GREEDY);
const serverStream = (origin: string, dispatcher: ReturnType<typeof keepAlivePool>, prompt: string) =>
  llamaServerGenerate(origin, dispatcher, prompt, TOKENS, GREEDY);

/** Tokens per second after the first. Speculation delivers tokens in bursts, so this counts all of them over the whole decode. */
const rate = (s: Stream): number => (s.decodeMs > 0 ? ((s.tokens - 1) * 1000) / s.decodeMs : 0);

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const binary = await buildLlamaServer();
  const app = await startApplianceProcess({
    backends: { gguf: 'llama-server' },
    plugins: {
      ...ENGINE_ONLY,
      engine: { options: { numParallel: 1, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1, maxLoadedModels: 8 } },
    },
  });
  const servers: ChildProcess[] = [];
  try {
    await createBenchModel(app, 'bench-none', MODEL);
    await createBenchModel(app, 'bench-small', SMALL);
    for (const c of CASES.filter((c) => c.name !== 'none')) {
      const res = await app.fetch('/api/create', {
        method: 'POST',
        body: JSON.stringify({ model: `bench-${c.name}`, from: 'bench-none', parameters: c.parameters, stream: false }),
      });
      if (res.status !== 200) throw new Error(`creating bench-${c.name}: ${res.status} ${await res.text()}`);
    }
    const agent = app.dispatcher();
    const sides = new Map<string, { origin: string; pool: ReturnType<typeof keepAlivePool> }>();
    for (const [i, c] of CASES.entries()) {
      const port = Number(values.port) + i;
      servers.push(
        await startLlamaServer(binary, {
          model: MODEL,
          port,
          threads: THREADS,
          // The appliance runs a speculating server's batches on the small-batch count (docs/engine.md).
          batchThreads: c.args.length > 0 ? THREADS : BATCH_THREADS,
          parallel: 1,
          contextPerSlot: CONTEXT,
          args: c.args,
        }),
      );
      const origin = `http://127.0.0.1:${port}`;
      sides.set(c.name, { origin, pool: keepAlivePool(origin) });
    }
    // Warm-up: each model loaded, each server answered once.
    for (const c of CASES) {
      const side = sides.get(c.name)!;
      await applianceStream(app, agent, `bench-${c.name}`, c.prompt);
      await serverStream(side.origin, side.pool, c.prompt);
    }
    const rows: Record<string, Array<{ appliance: number; llamaServer: number; drafted: number; accepted: number }>> = {};
    for (let r = 0; r < REPS; r++) {
      for (const c of CASES) {
        const side = sides.get(c.name)!;
        const a: number[] = [];
        const l: number[] = [];
        let drafted = 0;
        let accepted = 0;
        for (let i = 0; i < REQUESTS; i++) {
          // Interleaved, the order alternating, so a drifting machine moves both sides.
          const first = i % 2 === 0;
          if (!first) l.push(rate(await serverStream(side.origin, side.pool, c.prompt)));
          const s = await applianceStream(app, agent, `bench-${c.name}`, c.prompt);
          a.push(rate(s));
          drafted += s.drafted ?? 0;
          accepted += s.accepted ?? 0;
          if (first) l.push(rate(await serverStream(side.origin, side.pool, c.prompt)));
        }
        (rows[c.name] ??= []).push({ appliance: median(a), llamaServer: median(l), drafted, accepted });
        console.error(
          `rep ${r + 1}/${REPS} ${c.name}: appliance ${median(a).toFixed(1)} tok/s, llama-server ${median(l).toFixed(1)} tok/s, drafted ${drafted}, accepted ${accepted}`,
        );
      }
    }
    console.log(`\n${machineLine(machine)}`);
    console.log(
      `bench-random-135m-q4_0, 1 slot × ${CONTEXT}, threads ${THREADS}, ${TOKENS} greedy tokens, draft_num_predict ${DRAFT}, ${REQUESTS} requests per repetition`,
    );
    const summary: Record<string, unknown> = {};
    const base = rows['none'];
    for (const c of CASES) {
      const list = rows[c.name]!;
      const ratios = list.map((x) => x.appliance / x.llamaServer);
      const speedup = base ? list.map((x, i) => ({ appliance: x.appliance / base[i]!.appliance, llamaServer: x.llamaServer / base[i]!.llamaServer })) : [];
      const drafted = list.reduce((n, x) => n + x.drafted, 0);
      const accepted = list.reduce((n, x) => n + x.accepted, 0);
      const line =
        `${c.name.padEnd(6)} appliance ${median(list.map((x) => x.appliance)).toFixed(1)} tok/s, llama-server ${median(list.map((x) => x.llamaServer)).toFixed(1)} tok/s, ` +
        `ratio ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})` +
        (speedup.length > 0
          ? `, over none: appliance ×${median(speedup.map((s) => s.appliance)).toFixed(2)}, llama-server ×${median(speedup.map((s) => s.llamaServer)).toFixed(2)}`
          : '') +
        (drafted > 0 ? `, accepted ${accepted} of ${drafted} drafted (${((100 * accepted) / drafted).toFixed(0)} %)` : '');
      console.log(line);
      summary[c.name] = { rows: list, ratio: median(ratios), ratios, drafted, accepted };
    }
    const file = await saveResult('speculative', {
      machine,
      context: CONTEXT,
      threads: THREADS,
      tokens: TOKENS,
      draft: DRAFT,
      requests: REQUESTS,
      cases: summary,
    });
    console.log(`raw figures: ${file}`);
  } finally {
    for (const s of servers) s.kill('SIGKILL');
    await app.close();
  }
}

await main();
