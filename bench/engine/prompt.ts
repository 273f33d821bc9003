/**
 * Prompt-processing benchmark: how fast the appliance evaluates a long prompt, against llama.cpp's
 * own `llama-server` with the same threads (generation and prompt: `-t`, `-tb`), slots and context
 * per slot, on `../shared/models/gguf/bench-random-135m-q4_0.gguf`. The engine benchmark (run.ts)
 * uses a 25-token prompt; this one uses prompts of about 100, 500 and 1,300 tokens.
 *
 * Each request starts with a word no earlier prompt started with, so neither server finds any of
 * it cached. Rates are the servers' own: `prompt_eval_count / prompt_eval_duration` from the
 * appliance's last NDJSON object, `timings.prompt_per_second` from llama-server. Both include the
 * decode of the prompt's last token. One generated token per request. Figures are medians of
 * `--reps` interleaved requests per length; the ratio (appliance ÷ llama-server) is the median of
 * the ratios of each pair.
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/prompt.ts [--reps 5] [--slots 4] [--context 2048]`.
 * `LIA_THREADS` and `LIA_BATCH_THREADS` set the thread counts of both servers (default: the
 * appliance's automatic ones).
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { parseArgs } from 'node:util';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { median } from '../lib/stats.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { createModel } from '../../test/helpers/models.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from './llama-server.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    slots: { type: 'string', default: '4' },
    context: { type: 'string', default: '2048' },
    port: { type: 'string', default: '18951' },
  },
});
const REPS = Number(values.reps);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();
/** Sentence repeats per prompt: about 100, 500 and 1,300 tokens with the Llama-2 vocabulary. */
const LENGTHS = [10, 50, 130];
const SENTENCE = 'The cat and the dog played in the park. ';

let fresh = 0;
/** A prompt no earlier request began with (so no cache holds any of it). */
const promptOf = (repeats: number): string => `Request${fresh++} ${SENTENCE.repeat(repeats)}`;

async function main(): Promise<void> {
  const port = Number(values.port);
  const server: ChildProcess = await startLlamaServer(await buildLlamaServer(), {
    model: fixture('gguf/bench-random-135m-q4_0.gguf'),
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: SLOTS,
    contextPerSlot: CONTEXT,
  });
  const app = await startApplianceProcess({
    plugins: {
      ...ENGINE_ONLY,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
    },
  });
  try {
    await createModel(app, 'bench', 'gguf/bench-random-135m-q4_0.gguf');
    const appliance = async (prompt: string): Promise<{ tokens: number; rate: number }> => {
      const res = await app.fetch('/api/generate', {
        method: 'POST',
        body: JSON.stringify({ model: 'bench', prompt, raw: true, stream: false, options: { num_predict: 1 } }),
      });
      const o = (await res.json()) as { prompt_eval_count: number; prompt_eval_duration: number; error?: string };
      if (o.error) throw new Error(o.error);
      return { tokens: o.prompt_eval_count, rate: o.prompt_eval_count / (o.prompt_eval_duration / 1e9) };
    };
    const llamaServer = async (prompt: string): Promise<{ tokens: number; rate: number }> => {
      const res = await fetch(`http://127.0.0.1:${port}/completion`, { method: 'POST', body: JSON.stringify({ prompt, n_predict: 1, cache_prompt: false }) });
      const o = (await res.json()) as { timings: { prompt_n: number; prompt_per_second: number } };
      return { tokens: o.timings.prompt_n, rate: o.timings.prompt_per_second };
    };
    // Warm both: model load, first allocations; after the load the appliance starts its spare
    // runner once quiet for 1 s, which must land in neither side's figures.
    for (const n of LENGTHS) await appliance(promptOf(n));
    await new Promise((resolve) => setTimeout(resolve, 4000));
    for (const n of LENGTHS) await llamaServer(promptOf(n));

    console.log(
      `\nbench-random-135m-q4_0, prompt processing, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT} context, median of ${REPS}`,
    );
    console.log('| prompt tokens | appliance (tok/s) | llama-server (tok/s) | appliance ÷ llama-server |');
    console.log('|---:|---:|---:|---:|');
    for (const n of LENGTHS) {
      const pairs: { a: number; l: number; tokens: number }[] = [];
      for (let r = 0; r < REPS; r++) {
        let a;
        let l;
        if (r % 2 === 0) {
          a = await appliance(promptOf(n));
          l = await llamaServer(promptOf(n));
        } else {
          l = await llamaServer(promptOf(n));
          a = await appliance(promptOf(n));
        }
        pairs.push({ a: a.rate, l: l.rate, tokens: a.tokens });
      }
      const row = [median(pairs.map((p) => p.tokens)), median(pairs.map((p) => p.a)), median(pairs.map((p) => p.l)), median(pairs.map((p) => p.a / p.l))];
      console.log(`| ${row[0]} | ${row[1]!.toFixed(0)} | ${row[2]!.toFixed(0)} | ${row[3]!.toFixed(2)} |`);
    }
  } finally {
    server.kill();
    await app.close();
  }
}

await main();
