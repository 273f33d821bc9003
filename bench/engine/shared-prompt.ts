/**
 * Shared system prompt benchmark: 16 different conversations that begin with the same system
 * prompt of about 1,000 tokens, first one after another, then all at once, against llama-server
 * with the same model, threads, slots and context per slot. Time to first token of each
 * conversation, client side; the figure is the median of the 16, and the ratio appliance ÷
 * llama-server (below 1.0: the appliance answers sooner; 0.5: in half the time).
 *
 * Each phase of each repetition uses a system prompt no server has seen (a new first word), so
 * the one-after-another phase shows how a cached prefix is reused by the next conversation, and
 * the all-at-once phase how sixteen conversations arriving together share one evaluation of it.
 * Prompts are raw text (`/api/generate` with `raw`, llama-server's `/completion`); each
 * conversation asks 16 tokens. The two servers take turns per phase, the order alternating
 * between repetitions.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/shared-prompt.ts [--model 1b-q4_0] [--reps 2] [--slots 16] [--context 2048] [--engine llama-cpp|llama-server]`.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { ROOT } from '../../test/helpers/fixtures.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from './llama-server.js';
import { applianceGenerate, llamaServerGenerate } from './targets.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '1b-q4_0' },
    reps: { type: 'string', default: '2' },
    slots: { type: 'string', default: '16' },
    context: { type: 'string', default: '2048' },
    port: { type: 'string', default: '18961' },
    engine: { type: 'string', default: 'llama-server' },
  },
});
const REPS = Number(values.reps);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const CONVERSATIONS = 16;
const PREDICT = 16;
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

const SENTENCES = [
  'You are a helpful assistant for the staff of a small public library.',
  'Answer questions about opening hours, loans, renewals and the reading room politely and briefly.',
  'When a question is about a book, give its title, its author and where it stands on the shelves.',
  'Never invent a book that the catalogue does not hold, and say so when you do not know.',
];
/** A system prompt of about 1,000 tokens that begins with `tag` (so no earlier one shares it). */
const systemPrompt = (tag: string): string => {
  let text = `System ${tag}.`;
  for (let i = 0; text.length < 4300; i++) text += ` ${SENTENCES[i % SENTENCES.length]}`;
  return text;
};
const conversation = (system: string, i: number): string =>
  `${system}\n\nUser: Good morning, this is reader number ${i * 7919}; could you tell me whether the library holds a copy of book ${i}?\nAssistant:`;

type Generate = (prompt: string) => Promise<number>;

async function phase(generate: Generate, system: string, together: boolean): Promise<number[]> {
  const prompts = Array.from({ length: CONVERSATIONS }, (_, i) => conversation(system, i));
  if (together) return Promise.all(prompts.map(generate));
  const out: number[] = [];
  for (const p of prompts) out.push(await generate(p));
  return out;
}

async function main(): Promise<void> {
  const model = await benchModelPath(values.model);
  const port = Number(values.port);
  const server: ChildProcess = await startLlamaServer(await buildLlamaServer(), {
    model,
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: SLOTS,
    contextPerSlot: CONTEXT,
  });
  const app = await startApplianceProcess({
    // The appliance's engine for GGUF, named: its managed llama-server (the default) or node-llama-cpp (`--engine llama-cpp`).
    backends: { gguf: values.engine },
    plugins: {
      ...ENGINE_ONLY,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
    },
  });
  try {
    await createBenchModel(app, 'bench', model);
    const agent = app.dispatcher();
    const plain = keepAlivePool(`http://127.0.0.1:${port}`);
    const targets: Record<string, Generate> = {
      appliance: async (p) => (await applianceGenerate(app, agent, 'bench', p, PREDICT)).ttftMs,
      'llama-server': async (p) => (await llamaServerGenerate(`http://127.0.0.1:${port}`, plain, p, PREDICT)).ttftMs,
    };
    // Warm both (load, first allocations, connections), then a pause for the appliance's spare runner.
    for (const [name, generate] of Object.entries(targets)) {
      await Promise.all(Array.from({ length: 4 }, (_, i) => generate(`Warm-up ${name} ${i}: once upon a time`)));
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
    const results: { rep: number; phase: string; target: string; ttft: number[] }[] = [];
    let tag = 0;
    for (let r = 0; r < REPS; r++) {
      for (const together of [false, true]) {
        const order = r % 2 === 0 ? ['appliance', 'llama-server'] : ['llama-server', 'appliance'];
        for (const name of order) {
          const ttft = await phase(targets[name]!, systemPrompt(`${process.pid}-${tag++}`), together);
          const row = { rep: r + 1, phase: together ? 'concurrent' : 'sequential', target: name, ttft };
          results.push(row);
          console.error(
            `rep ${row.rep} ${row.phase} ${name}: median ${median(ttft).toFixed(0)} ms, first ${ttft[0]!.toFixed(0)} ms, max ${Math.max(...ttft).toFixed(0)} ms`,
          );
        }
      }
    }
    console.log(
      `\n${modelLabel(model)}, ${CONVERSATIONS} conversations sharing a ~1,000-token system prompt, ${PREDICT} tokens each, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT} context, ${REPS} repetitions`,
    );
    console.log('| phase | rep | appliance median TTFT (ms) | llama-server median TTFT (ms) | appliance ÷ llama-server |');
    console.log('|---|---:|---:|---:|---:|');
    for (const ph of ['sequential', 'concurrent']) {
      for (let r = 1; r <= REPS; r++) {
        const a = median(results.find((x) => x.rep === r && x.phase === ph && x.target === 'appliance')!.ttft);
        const l = median(results.find((x) => x.rep === r && x.phase === ph && x.target === 'llama-server')!.ttft);
        console.log(`| ${ph} | ${r} | ${a.toFixed(0)} | ${l.toFixed(0)} | ${(a / l).toFixed(2)} |`);
      }
    }
    const out = path.join(ROOT, 'bench/results');
    await mkdir(out, { recursive: true });
    await writeFile(
      path.join(out, `shared-prompt-${new Date().toISOString().replace(/[:.]/g, '-')}.json`),
      JSON.stringify(
        {
          model: modelLabel(model),
          engine: values.engine,
          loadavg: os.loadavg(),
          threads: THREADS,
          batchThreads: BATCH_THREADS,
          slots: SLOTS,
          context: CONTEXT,
          results,
        },
        null,
        2,
      ),
    );
    await plain.close();
  } finally {
    server.kill();
    await app.close();
  }
}

await main();
process.exit(0);
