/**
 * Upstream benchmark: LIA fronting a llama-server (the `backend-upstream` plugin, OpenAI flavour)
 * against the same llama-server asked directly, in one run. Both are asked the same streamed
 * `/v1/completions` (raw prompt, same sampling and seed, `max_tokens` fixed) by the same client
 * (undici `request` over open connections), so the difference is what LIA adds: HTTPS and the
 * key check at the front, the engine's queue and observers, the translation both ways and one
 * more local HTTP hop.
 *
 * Figures (bench/engine/figures.ts), each the median of `--reps` interleaved runs, ratios the
 * medians of the ratios within a repetition (LIA ÷ direct for rates, direct ÷ LIA for TTFT, so
 * ≥ 1.0 means LIA loses nothing): single-stream decode tokens/s, time to first token, aggregate
 * tokens/s at 4 and 16 streams. Also LIA's own CPU time (user + system of the `lia serve`
 * process, from /proc) per proxied request and per token over the timed requests.
 *
 * Run: `node --conditions=lia-source --import tsx bench/upstream/run.ts [--reps 3] [--tokens 128] [--model 135m|1b-q4_0|1b-q8_0]`
 * (`--model`: bench/models/models.ts; the 124M default makes LIA's fixed cost per request weigh most)
 * (builds llama-server first when bench/.cache has none: see bench/engine/llama-server.ts).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Dispatcher } from 'undici';
import { freePort, startApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool, timedPost } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { measureFigures, PROMPT, SAMPLING, type Figures, type Stream } from '../engine/figures.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from '../engine/llama-server.js';
import { timeStream } from '../engine/targets.js';
import { benchModelPath, modelLabel } from '../models/models.js';

const { values } = parseArgs({
  options: { reps: { type: 'string', default: '3' }, tokens: { type: 'string', default: '128' }, model: { type: 'string', default: '135m' } },
});
const REPS = Number(values.reps);
const TOKENS = Number(values.tokens);
const SLOTS = 16;
const CONTEXT = 512;

/** user + system CPU seconds of a process so far (Linux /proc). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
}

/** Times one streamed `/v1/completions` answer (SSE); tokens from the usage frame. */
function timeSse(res: Dispatcher.ResponseData, t0: number): Promise<Stream> {
  return timeStream(
    res,
    (line) => {
      if (!line.startsWith('data: ') || line === 'data: [DONE]') return { text: false };
      const o = JSON.parse(line.slice(6)) as { choices?: Array<{ text?: string }>; usage?: { completion_tokens?: number }; error?: unknown };
      if (o.error) throw new Error(JSON.stringify(o.error));
      return { text: Boolean(o.choices?.[0]?.text), ...(o.usage?.completion_tokens ? { tokens: o.usage.completion_tokens } : {}) };
    },
    t0,
  );
}

async function main(): Promise<void> {
  const model = await benchModelPath(values.model);
  const binary = await buildLlamaServer();
  const { threads, batchThreads } = benchThreads();
  const port = await freePort();
  const server = await startLlamaServer(binary, { model, port, threads, batchThreads, parallel: SLOTS, contextPerSlot: CONTEXT });
  const app = await startApplianceProcess({
    plugins: {
      'host-network': false,
      'host-gpu': false,
      'host-services': false,
      'backend-transformers': false,
      'backend-llama-cpp': false,
      webui: false,
      metrics: false,
      'backend-upstream': {
        options: { upstreams: [{ name: 'llama-server', url: `http://127.0.0.1:${port}`, flavour: 'openai', models: [{ model: 'bench', name: 'bench' }] }] },
      },
    },
  });
  const body = JSON.stringify({ model: 'bench', prompt: PROMPT, max_tokens: TOKENS, stream: true, stream_options: { include_usage: true }, ...SAMPLING });
  const direct = keepAlivePool(`http://127.0.0.1:${port}`);
  const front = app.dispatcher();
  let proxied = { requests: 0, tokens: 0 };
  const targets = {
    direct: async () => {
      const { res, t0 } = await timedPost(`http://127.0.0.1:${port}/v1/completions`, { dispatcher: direct, body });
      return timeSse(res, t0);
    },
    lia: async () => {
      const { res, t0 } = await timedPost(`${app.url}/v1/completions`, { dispatcher: front, headers: { authorization: `Bearer ${app.key}` }, body });
      const s = await timeSse(res, t0);
      proxied.requests++;
      proxied.tokens += s.tokens;
      return s;
    },
  };
  try {
    for (const go of [targets.lia, targets.direct]) await Promise.all(Array.from({ length: SLOTS }, go)); // warm both and open the connections
    const results: Record<'lia' | 'direct', Figures[]> = { lia: [], direct: [] };
    const cpu: Array<{ perRequestMs: number; perTokenUs: number }> = [];
    for (let r = 0; r < REPS; r++) {
      for (const name of r % 2 === 0 ? (['lia', 'direct'] as const) : (['direct', 'lia'] as const)) {
        const before = name === 'lia' ? cpuSeconds(app.pid) : 0;
        proxied = { requests: 0, tokens: 0 };
        results[name].push(await measureFigures(targets[name]));
        if (name === 'lia') {
          const spent = cpuSeconds(app.pid) - before;
          cpu.push({ perRequestMs: (spent / proxied.requests) * 1000, perTokenUs: (spent / proxied.tokens) * 1e6 });
        }
        console.error(`rep ${r + 1}/${REPS} ${name}: ${JSON.stringify(results[name].at(-1))}`);
      }
    }
    const keys = ['decode', 'ttft', 'agg4', 'agg16'] as const;
    const labels = {
      decode: 'single-stream decode (tok/s)',
      ttft: 'time to first token (ms)',
      agg4: 'aggregate, 4 streams (tok/s)',
      agg16: 'aggregate, 16 streams (tok/s)',
    };
    console.log(
      `\n${modelLabel(model)} on llama-server (${SLOTS} slots × ${CONTEXT}, threads ${threads}/${batchThreads}), ${TOKENS} tokens per stream, median of ${REPS}`,
    );
    console.log(`${'figure'.padEnd(32)}${'via LIA'.padStart(10)}${'direct'.padStart(10)}${'ratio'.padStart(8)}`);
    for (const k of keys) {
      const ratio = median(results.lia.map((x, i) => (k === 'ttft' ? results.direct[i]![k] / x[k] : x[k] / results.direct[i]![k])));
      console.log(
        `${labels[k].padEnd(32)}${median(results.lia.map((x) => x[k]))
          .toFixed(1)
          .padStart(10)}${median(results.direct.map((x) => x[k]))
          .toFixed(1)
          .padStart(10)}${ratio.toFixed(2).padStart(8)}`,
      );
    }
    console.log(
      `LIA CPU per proxied request: ${median(cpu.map((c) => c.perRequestMs)).toFixed(2)} ms; per token: ${median(cpu.map((c) => c.perTokenUs)).toFixed(1)} µs`,
    );
  } finally {
    await direct.close();
    await app.close();
    server.kill();
  }
}

await main();
process.exit(0);
