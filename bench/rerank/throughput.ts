/**
 * Rerank throughput: the appliance (its own `lia serve` process, HTTPS, a key) serving a GGUF
 * reranker (`--model`, below) on `/v1/rerank` against llama.cpp's `llama-server --rerank` on the same file
 * (its `/v1/rerank`), with the same threads (`-t`, `-tb`), slots (`-np`), context per slot and batch
 * (512). The appliance ranks with the engine it picks by default (`--engine auto`): its own
 * `llama-server --rerank` (backend-llama-server), since the binary this benchmark builds is the one
 * it finds (docs/backends.md, "Rerankers"); `--engine llama-cpp` keeps the reranker on
 * node-llama-cpp's ranking context (a `backends` entry) to measure that path.
 *
 * Each request is one query and `--docs` documents of about `--words` words (text drawn from a
 * fixed word list, new for every request, so that nothing a server kept from an earlier request
 * helps). A wave is `clients` clients each sending `--per-client` requests one after another;
 * its throughput is all documents scored ÷ the wave's wall time, on the client. Waves of 1 and of
 * `--clients` (default 8) clients run for each server in every round, the servers' order
 * alternating between rounds; the ratio of a round is the appliance's documents per second ÷
 * llama-server's (≥ 1.0: the appliance is as fast or faster). Reported: the medians over the rounds
 * and the smallest and largest round ratio. Only throughput is compared: the scores differ in
 * scale (LIA returns probabilities, llama-server the raw logit).
 *
 * Run: `node --conditions=lia-source --import tsx bench/rerank/throughput.ts [--rounds 10] [--clients 8] [--per-client 4] [--docs 16] [--words 50] [--slots 8] [--context 512] [--engine auto|llama-cpp] [--server-args='--no-kv-unified --cache-ram 0'] [--model bench|tiny]`;
 * `--model bench` (the default) is bench-reranker.gguf, a MiniLM-L12-sized cross-encoder (384 wide,
 * 12 layers, random weights), `tiny` the 2-layer test fixture, where a request's fixed costs
 * outweigh the model's work (needs `npm run fixtures` and `lia engine build`; both are built here on first use otherwise).
 * `LIA_THREADS` / `LIA_BATCH_THREADS` set both servers' thread counts. Prints the machine first and
 * the table last, and writes `bench/results/rerank-<time>.json`.
 *
 * @module
 */
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Dispatcher } from 'undici';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { createModel } from '../../test/helpers/models.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { freePort, startApplianceProcess } from '../lib/appliance-process.js';
import { countConnections, keepAlivePool, resent, timedPost } from '../lib/connections.js';
import { assertSameConfiguration, machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';
import { amxNote, benchThreads, buildLlamaServer, startLlamaServer } from '../engine/llama-server.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '10' },
    clients: { type: 'string', default: '8' },
    'per-client': { type: 'string', default: '4' },
    docs: { type: 'string', default: '16' },
    words: { type: 'string', default: '50' },
    slots: { type: 'string', default: '8' },
    context: { type: 'string', default: '512' },
    engine: { type: 'string', default: 'auto' },
    'server-args': { type: 'string', default: '' },
    model: { type: 'string', default: 'bench' },
  },
});
/**
 * Extra arguments of the llama-server run directly, e.g. `--no-kv-unified --cache-ram 0` (the
 * flags the appliance gives its own servers). Defaults to none: llama-server's own defaults.
 */
const SERVER_ARGS = values['server-args'].split(' ').filter(Boolean);
if (values.engine !== 'auto' && values.engine !== 'llama-cpp') throw new Error('--engine is auto or llama-cpp');
/** The appliance's `backends` setting: none (its default choice), or the reranker kept on node-llama-cpp. */
const BACKENDS = values.engine === 'llama-cpp' ? { 'reranker:latest': 'llama-cpp' } : {};
const ROUNDS = Number(values.rounds);
const CLIENTS = [1, Number(values.clients)];
const PER_CLIENT = Number(values['per-client']);
const DOCS = Number(values.docs);
const WORDS = Number(values.words);
const SLOTS = Number(values.slots);
const CONTEXT = Number(values.context);
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

const VOCABULARY = (
  'the a cat dog eats meat fish bird house garden river city market price stock fell rose water food ' +
  'small large old new quick slow red green blue morning evening night day week year people child ' +
  'teacher doctor farmer writes reads plays runs walks sleeps builds sells buys carries finds keeps ' +
  'tree flower stone road bridge train car boat plane school library hospital kitchen window door ' +
  'because while after before under over near far always never often sometimes every each many few'
).split(' ');
let seed = 1;
/** A deterministic pseudo-random word sequence (a 32-bit LCG), new at every call. */
function words(n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    seed = (Math.imul(seed, 1_664_525) + 1_013_904_223) >>> 0;
    out.push(VOCABULARY[seed % VOCABULARY.length]!);
  }
  return `${out.join(' ')}.`;
}

/** A request's body: a query and {@link DOCS} documents no earlier request had. */
function rerankBody(): string {
  return JSON.stringify({
    model: 'reranker',
    query: `What do ${words(4)}`,
    documents: Array.from({ length: DOCS }, () => words(WORDS)),
    return_documents: false,
  });
}

/** One rerank request; throws unless every document got a score. */
async function rerank(url: string, dispatcher: Dispatcher, headers: Record<string, string>): Promise<void> {
  const { res } = await timedPost(url, { dispatcher, headers, body: rerankBody() });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${url}: HTTP ${res.statusCode}: ${text}`);
  const results = (JSON.parse(text) as { results?: unknown[] }).results;
  if (results?.length !== DOCS) throw new Error(`${url}: ${results?.length} results for ${DOCS} documents: ${text.slice(0, 300)}`);
}

interface Side {
  name: 'appliance' | 'llama-server';
  rerank(): Promise<void>;
}

/** Documents per second of `clients` clients each sending {@link PER_CLIENT} requests in turn. */
async function wave(side: Side, clients: number): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < PER_CLIENT; i++) await side.rerank();
    }),
  );
  return (clients * PER_CLIENT * DOCS) / ((performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const model = await builtFixture(values.model === 'tiny' ? 'tiny-reranker.gguf' : 'bench-reranker.gguf', console.error);
  const binary = await buildLlamaServer();
  const port = await freePort();
  const server = await startLlamaServer(binary, {
    model,
    port,
    threads: THREADS,
    batchThreads: BATCH_THREADS,
    parallel: SLOTS,
    contextPerSlot: CONTEXT,
    args: ['--rerank', ...SERVER_ARGS],
  });
  const app = await startApplianceProcess({
    plugins: {
      ...ENGINE_ONLY,
      'api-openai': true,
      engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
    },
    backends: BACKENDS,
  });
  const plain = keepAlivePool(`http://127.0.0.1:${port}`);
  try {
    await createModel(app, 'reranker', model);
    const appliance: Side = { name: 'appliance', rerank: () => rerank(`${app.url}/v1/rerank`, app.dispatcher(), { authorization: `Bearer ${app.key}` }) };
    const llamaServer: Side = { name: 'llama-server', rerank: () => rerank(`http://127.0.0.1:${port}/v1/rerank`, plain, {}) };

    // Warm both (the appliance loads the model and creates its ranking context on the first
    // request), with as many connections as the widest wave; then a pause for the spare runner the
    // appliance starts after a quiet second.
    for (const side of [appliance, llamaServer]) await wave(side, CLIENTS[1]!);
    await new Promise((resolve) => setTimeout(resolve, 4000));

    const ps = (await (await app.fetch('/api/ps')).json()) as { models: { name: string; context_length?: number }[] };
    const props = (await (await fetch(`http://127.0.0.1:${port}/props`)).json()) as { total_slots?: number; default_generation_settings?: { n_ctx?: number } };
    assertSameConfiguration([
      {
        name: 'context per slot',
        wanted: CONTEXT,
        sides: { appliance: ps.models.find((m) => m.name.startsWith('reranker'))?.context_length, 'llama-server': props.default_generation_settings?.n_ctx },
      },
      { name: 'slots', wanted: SLOTS, sides: { 'llama-server': props.total_slots } },
    ]);

    const connections = countConnections();
    connections.on = true;
    type Round = Record<string, { appliance: number; 'llama-server': number; ratio: number }>;
    const rounds: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const round: Round = {};
      for (const clients of CLIENTS) {
        const row = { appliance: 0, 'llama-server': 0, ratio: 0 };
        for (const side of r % 2 === 0 ? [appliance, llamaServer] : [llamaServer, appliance]) row[side.name] = await wave(side, clients);
        row.ratio = row.appliance / row['llama-server'];
        round[clients] = row;
      }
      rounds.push(round);
      console.error(
        `round ${r + 1}/${ROUNDS}: ${CLIENTS.map((c) => `${c} client(s): appliance ${round[c]!.appliance.toFixed(0)}, llama-server ${round[c]!['llama-server'].toFixed(0)} docs/s, ratio ${round[c]!.ratio.toFixed(3)}`).join('; ')}`,
      );
    }
    connections.on = false;
    connections.stop();

    const result = Object.fromEntries(
      CLIENTS.map((c) => {
        const ratios = rounds.map((x) => x[c]!.ratio);
        return [
          c,
          {
            appliance: median(rounds.map((x) => x[c]!.appliance)),
            llamaServer: median(rounds.map((x) => x[c]!['llama-server'])),
            ratio: median(ratios),
            min: Math.min(...ratios),
            max: Math.max(...ratios),
          },
        ];
      }),
    );
    console.log(
      `\n${machineLine(machine)}; load ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')} after the run`,
    );
    console.log(
      `${path.basename(model)} (appliance engine: ${values.engine}; llama-server args: --rerank ${SERVER_ARGS.join(' ')}), ${DOCS} documents of ${WORDS} words per request, ${PER_CLIENT} requests per client per wave, threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT} context, ${ROUNDS} rounds`,
    );
    const amx = amxNote();
    if (amx) console.log(`WARNING: ${amx}`);
    console.log(`${'clients'.padEnd(10)}${'appliance docs/s'.padStart(18)}${'llama-server docs/s'.padStart(21)}${'ratio'.padStart(8)}   rounds`);
    for (const c of CLIENTS) {
      const x = result[c]!;
      console.log(
        `${String(c).padEnd(10)}${x.appliance.toFixed(1).padStart(18)}${x.llamaServer.toFixed(1).padStart(21)}${x.ratio.toFixed(3).padStart(8)}   ${x.min.toFixed(3)}-${x.max.toFixed(3)}`,
      );
    }
    console.log('ratio: appliance ÷ llama-server (goal ≥ 1.0)');
    console.log(`connections opened while timing: ${JSON.stringify(connections.opened)}; requests sent again (timedPost): ${JSON.stringify(resent)}`);
    await saveResult('rerank', {
      machine,
      threads: THREADS,
      batchThreads: BATCH_THREADS,
      slots: SLOTS,
      context: CONTEXT,
      engine: values.engine,
      serverArgs: SERVER_ARGS,
      model: path.basename(model),
      docs: DOCS,
      words: WORDS,
      perClient: PER_CLIENT,
      result,
      rounds,
    });
  } finally {
    await plain.close();
    await app.close();
    server.kill();
  }
}

await main();
process.exit(0);
