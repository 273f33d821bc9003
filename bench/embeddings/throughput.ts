/**
 * Embedding throughput: `/v1/embeddings` of a running appliance (HTTPS, API key, the `openai`
 * npm client with its default base64 encoding) against a bare transformers.js
 * `feature-extraction` pipeline on the same model, in the same process and the same run.
 *
 * Workload: 256 short English sentences (6 to 16 words, fixed seed) in requests of 32, on
 * `../shared/models/onnx/bench-random-minilm-l6` (all-MiniLM-L6-v2's exact shape, int8).
 * The contenders are interleaved request by request (each batch of 32 goes through every
 * contender, in rotating order) so that noise on a shared machine hits all of them alike; a
 * round is the 256 sentences, and each figure is the median over rounds of sentences per second
 * of embedding time. The ratio is also given as the median of per-round ratios. The bare
 * pipeline runs twice: with the session options the backend uses (threads, no spinning: the
 * cost of the appliance around the same engine) and with the library's defaults (what a user of
 * transformers.js gets).
 *
 * Run: `node --conditions=lia-source --import tsx bench/embeddings/throughput.ts [--rounds 7] [--threads N] [--json FILE]`
 *
 * @module
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { fetch as undiciFetch } from 'undici';
import { threadsFor } from '../../plugins/backend-transformers/backend.js';
import { transformers } from '../../plugins/backend-transformers/runtime.js';
import { startTestAppliance } from '../../test/helpers/appliance.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { createModel } from '../../test/helpers/models.js';
import { median } from '../lib/stats.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '7' },
    threads: { type: 'string', default: '0' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const THREADS = threadsFor(Number(args.threads));
const SENTENCES = 256;
const BATCH = 32;
const FIXTURE = 'onnx/bench-random-minilm-l6';
const SETTLE_MS = 30;

/** 256 deterministic short sentences. */
function sentences(): string[] {
  const subjects = ['The old fisherman', 'A small robot', 'My neighbour', 'The committee', 'Every student', 'The red fox', 'Our new server', 'A quiet child'];
  const verbs = ['repaired', 'painted', 'forgot about', 'carefully measured', 'quietly watched', 'sold', 'described', 'found'];
  const objects = [
    'the wooden boat',
    'a broken clock',
    'the garden fence',
    'three yellow kites',
    'the evening news',
    'an empty bottle',
    'the river bank',
    'a paper map',
  ];
  const tails = [
    'before sunrise.',
    'near the harbour.',
    'in the rain.',
    'without a word.',
    'for the second time this week.',
    'while everyone slept.',
    'at the market.',
    '',
  ];
  let seed = 42;
  const pick = <T>(list: T[]): T => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return list[seed % list.length]!;
  };
  return Array.from({ length: SENTENCES }, () => `${pick(subjects)} ${pick(verbs)} ${pick(objects)} ${pick(tails)}`.trim());
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** The appliance against `other`: ratio of medians, and median of the per-round ratios. */
function ratio(results: Record<string, number[]>, other: string): { ofMedians: number; medianOfRounds: number } {
  const mine = results['appliance']!;
  const theirs = results[other]!;
  return {
    ofMedians: round3(median(mine) / median(theirs)),
    medianOfRounds: round3(median(mine.map((x, i) => x / theirs[i]!))),
  };
}

type Embed = (batch: string[]) => Promise<number[][]>;

/** One round: every batch through every contender; sentences per second of each one's time. */
async function round(texts: string[], contenders: Record<string, Embed>, rotation: number): Promise<Record<string, number>> {
  const names = Object.keys(contenders);
  const spent: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
  for (let i = 0, b = rotation; i < texts.length; i += BATCH, b++) {
    const batch = texts.slice(i, i + BATCH);
    for (let k = 0; k < names.length; k++) {
      const name = names[(b + k) % names.length]!;
      const started = performance.now();
      const vectors = await contenders[name]!(batch);
      spent[name]! += performance.now() - started;
      if (vectors.length !== batch.length || vectors[0]!.length !== 384) throw new Error(`${name}: wrong vectors`);
      // Untimed pause: the library-default session's threads spin on after a run and would slow
      // whichever contender comes next.
      await sleep(SETTLE_MS);
    }
  }
  return Object.fromEntries(names.map((n) => [n, (texts.length / spent[n]!) * 1000]));
}

async function main(): Promise<void> {
  const texts = sentences();
  const dir = fixture(FIXTURE);
  const app = await startTestAppliance({
    plugins: {
      'host-network': false,
      'host-gpu': false,
      'host-services': false,
      webui: false,
      'backend-transformers': { options: { threads: THREADS } },
    },
  });
  try {
    await createModel(app, 'minilm-bench', FIXTURE);
    const client = new OpenAI({
      baseURL: `${app.url}/v1`,
      apiKey: app.key,
      maxRetries: 0,
      fetch: ((url: string, init: object) => undiciFetch(url, { ...init, dispatcher: app.dispatcher() })) as unknown as typeof fetch,
    });
    const viaApi = async (batch: string[]): Promise<number[][]> =>
      (await client.embeddings.create({ model: 'minilm-bench', input: batch })).data.map((d) => d.embedding);

    const { pipeline } = await transformers();
    const same = await pipeline('feature-extraction', dir, {
      dtype: 'q8',
      local_files_only: true,
      session_options: {
        intraOpNumThreads: THREADS,
        interOpNumThreads: 1,
        extra: { session: { intra_op: { allow_spinning: '0' } } },
      },
    });
    const defaults = await pipeline('feature-extraction', dir, { dtype: 'q8', local_files_only: true });
    const bare =
      (p: typeof same) =>
      async (batch: string[]): Promise<number[][]> =>
        (await p(batch, { pooling: 'mean', normalize: true })).tolist() as number[][];

    const contenders: Record<string, Embed> = {
      appliance: viaApi,
      pipelineSameOptions: bare(same),
      pipelineDefaults: bare(defaults),
    };
    // Warm-up: loads the model in the appliance and runs each contender twice.
    await round(texts.slice(0, BATCH * 2), contenders, 0);
    const results: Record<string, number[]> = Object.fromEntries(Object.keys(contenders).map((k) => [k, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, rate] of Object.entries(await round(texts, contenders, r))) results[name]!.push(rate);
    }
    await same.dispose();
    await defaults.dispose();

    const summary = {
      model: FIXTURE,
      sentences: SENTENCES,
      batch: BATCH,
      rounds: ROUNDS,
      threads: THREADS,
      cpus: os.cpus().length,
      sentencesPerSecond: Object.fromEntries(Object.entries(results).map(([k, v]) => [k, Math.round(median(v) * 10) / 10])),
      perRound: Object.fromEntries(Object.entries(results).map(([k, v]) => [k, v.map((x) => Math.round(x))])),
      ratio: {
        vsPipelineSameOptions: ratio(results, 'pipelineSameOptions'),
        vsPipelineDefaults: ratio(results, 'pipelineDefaults'),
      },
      goal: 'appliance >= 0.9x the bare pipeline',
    };
    console.log(JSON.stringify(summary, null, 2));
    if (args.json) await writeFile(args.json, JSON.stringify(summary, null, 2) + '\n');
  } finally {
    await app.close();
  }
}

await main();
