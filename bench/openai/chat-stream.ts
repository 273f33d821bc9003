/**
 * Streamed chat latency and speed of `/v1/chat/completions` (the OpenAI translator) against
 * `/api/chat` (the native path it translates to) on the same appliance in the same run, and
 * against llama.cpp's own `llama-server` `/v1/chat/completions` on the same model and threads.
 *
 * Figures per contender: time to first token (request sent → first non-empty content) and
 * streamed tokens/s (completion tokens after the first ÷ time from the first to the last one).
 * Workload: one chat request at a time, `max_tokens` 128 (the model rarely stops early: random
 * weights), fixed seed, on `../shared/models/gguf/bench-random-135m-q4_0.gguf`. Rounds go through
 * every order of the contenders in turn, so drift on a shared machine hits all alike and each
 * contender follows each other one equally often (a request right after llama-server's finds the
 * appliance's caches cold; plain rotation put /v1 there in two rounds of three and `/api/chat` in
 * one, which read as a 5-9 % TTFT gap between them). Each figure is the median of its rounds,
 * each ratio the median of the ratios within a round. The appliance is reached over HTTPS with
 * its key (as users do); llama-server over plain HTTP on 127.0.0.1 (it has no TLS by default). All three are read by the same client, undici's
 * `request` (Node streams; `fetch` added 1.5–3 ms per request of its own on this machine), over
 * open connections (see bench/lib/connections.ts: otherwise most requests paid a TLS handshake).
 *
 * llama-server is the one the engine benchmark builds from the llama.cpp source node-llama-cpp
 * bundles (bench/engine/llama-server.ts: built once, cached under `bench/.cache/`), so both run
 * the same release; `--server PATH` runs another binary. It runs with the engine's thread counts
 * (`LIA_THREADS` / `LIA_BATCH_THREADS` apply to both servers, see `benchThreads`),
 * 4 slots of 2048 tokens (as the engine loads the model) and the GGUF's chat template (`--jinja`).
 *
 * Run: `node --conditions=lia-source --import tsx bench/openai/chat-stream.ts [--rounds 12] [--tokens 128] [--same-sampling] [--json FILE]`
 * (a multiple of 6 keeps the orders balanced)
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Dispatcher } from 'undici';
import { benchThreads, buildLlamaServer, startLlamaServer } from '../engine/llama-server.js';
import { freePort, startApplianceProcess } from '../lib/appliance-process.js';
import { countConnections, keepAlivePool, resent, timedPost } from '../lib/connections.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { createModel } from '../../test/helpers/models.js';
import { median } from '../lib/stats.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    tokens: { type: 'string', default: '128' },
    server: { type: 'string' },
    json: { type: 'string' },
    'same-sampling': { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(args.rounds);
const TOKENS = Number(args.tokens);
const FIXTURE = 'gguf/bench-random-135m-q4_0.gguf';
const MESSAGES = [
  { role: 'system', content: 'You are a storyteller.' },
  { role: 'user', content: 'Write a long story about a dragon who learns to bake bread.' },
];

/** One measured request. */
interface Sample {
  ttftMs: number;
  tokensPerSecond: number;
  tokens: number;
}

/** How to send a request and read its stream. */
interface Contender {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  /** The connection pool its requests go over (kept open between requests). */
  dispatcher: Dispatcher;
  /** From one stream line/event: the content text, the completion token count, or neither. */
  parse(line: string): { text?: string; tokens?: number };
}

function openaiParse(line: string): { text?: string; tokens?: number } {
  if (!line.startsWith('data: ') || line === 'data: [DONE]') return {};
  const chunk = JSON.parse(line.slice(6)) as { choices?: { delta?: { content?: string } }[]; usage?: { completion_tokens: number } };
  const text = chunk.choices?.[0]?.delta?.content;
  return { ...(text ? { text } : {}), ...(chunk.usage ? { tokens: chunk.usage.completion_tokens } : {}) };
}

function ollamaParse(line: string): { text?: string; tokens?: number } {
  if (line.length === 0) return {};
  const obj = JSON.parse(line) as { message?: { content?: string }; done?: boolean; eval_count?: number };
  const text = obj.message?.content;
  return { ...(text ? { text } : {}), ...(obj.done ? { tokens: obj.eval_count ?? 0 } : {}) };
}

async function measure(c: Contender): Promise<Sample> {
  const { res, t0: started } = await timedPost(c.url, { dispatcher: c.dispatcher, headers: c.headers, body: JSON.stringify(c.body) });
  if (res.statusCode !== 200) throw new Error(`${c.name}: ${res.statusCode} ${await res.body.text()}`);
  let first = 0;
  let last = 0;
  let tokens = 0;
  let buffered = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    buffered += decoder.decode(bytes as Uint8Array, { stream: true });
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    const now = performance.now();
    for (const line of lines) {
      const { text, tokens: n } = c.parse(line.trim());
      if (text) {
        if (first === 0) first = now;
        last = now;
      }
      if (n !== undefined) tokens = n;
    }
  }
  if (first === 0 || tokens < 2) throw new Error(`${c.name}: no tokens streamed`);
  return { ttftMs: first - started, tokensPerSecond: ((tokens - 1) / (last - first)) * 1000, tokens };
}

/** Every order of `items` (3 contenders: 6 orders, in which each one follows each other one twice). */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((first, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [first, ...rest]));
}

async function main(): Promise<void> {
  const modelFile = fixture(FIXTURE);
  const { threads, batchThreads } = benchThreads();
  const app = await startApplianceProcess({ plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } });
  let server: ChildProcess | undefined;
  try {
    await createModel(app, 'bench', FIXTURE);
    const auth = { authorization: `Bearer ${app.key}` };
    const openaiBody = {
      model: 'bench',
      messages: MESSAGES,
      max_tokens: TOKENS,
      seed: 1,
      temperature: 0.8,
      stream: true,
      stream_options: { include_usage: true },
    };
    const binary = args.server ?? (await buildLlamaServer());
    const port = await freePort();
    server = await startLlamaServer(binary, { model: modelFile, port, threads, batchThreads, parallel: 4, contextPerSlot: 2048, jinja: true });
    const serverUrl = `http://127.0.0.1:${port}`;
    // The same request gets each server's own defaults: the appliance Ollama's (top_k 40, top_p 0.9,
    // no repeat penalty), llama-server its own (top_k 40, top_p 0.95, min_p 0.05, no repeat
    // penalty). `--same-sampling` sends llama-server the appliance's defaults in its extra fields,
    // to compare the engines on exactly equal work.
    const serverBody = args['same-sampling'] ? { ...openaiBody, repeat_penalty: 1.0, top_k: 40, top_p: 0.9, min_p: 0 } : openaiBody;
    const contenders: Contender[] = [
      {
        name: 'lia /v1/chat/completions',
        url: `${app.url}/v1/chat/completions`,
        headers: auth,
        dispatcher: app.dispatcher(),
        body: openaiBody,
        parse: openaiParse,
      },
      {
        name: 'lia /api/chat',
        url: `${app.url}/api/chat`,
        headers: auth,
        dispatcher: app.dispatcher(),
        parse: ollamaParse,
        body: { model: 'bench', messages: MESSAGES, stream: true, options: { num_predict: TOKENS, seed: 1, temperature: 0.8 } },
      },
      {
        name: 'llama-server /v1/chat/completions',
        url: `${serverUrl}/v1/chat/completions`,
        headers: {},
        body: serverBody,
        parse: openaiParse,
        dispatcher: keepAlivePool(serverUrl),
      },
    ];

    // Warm-up: load, caches, JIT, connections. After its load the appliance starts its next spare
    // runner once it has been quiet for 1 s (about 2 s of start-up): that happens in a pause after
    // the appliance's warm-ups, before llama-server's, so that it lands in nobody's figures.
    for (const c of contenders) {
      if (!c.url.startsWith(app.url)) await new Promise((resolve) => setTimeout(resolve, 3000));
      await measure(c);
    }
    const connections = countConnections();
    connections.on = true;
    const samples = new Map<string, Sample[]>(contenders.map((c) => [c.name, []]));
    const orders = permutations(contenders);
    for (let r = 0; r < ROUNDS; r++) {
      for (const c of orders[r % orders.length]!) samples.get(c.name)!.push(await measure(c));
    }

    connections.stop();
    const summary = contenders.map((c) => {
      const s = samples.get(c.name)!;
      return {
        name: c.name,
        ttftMs: median(s.map((x) => x.ttftMs)),
        tokensPerSecond: median(s.map((x) => x.tokensPerSecond)),
        tokens: median(s.map((x) => x.tokens)),
      };
    });
    // Each ratio is the median of the ratios within a round (the contenders of one round run back
    // to back, so a machine that drifts between rounds moves both sides of a ratio alike).
    const paired = (a: string, b: string) => {
      const xs = samples.get(a)!;
      const ys = samples.get(b)!;
      return {
        tokensPerSecond: median(xs.map((x, i) => x.tokensPerSecond / ys[i]!.tokensPerSecond)),
        ttft: median(xs.map((x, i) => ys[i]!.ttftMs / x.ttftMs)),
      };
    };
    const [v1, native, llama] = summary;
    const ratios = {
      // Speed ratios: higher is better for /v1; TTFT ratio = other's TTFT ÷ /v1's TTFT.
      v1VsApiChat: paired(v1!.name, native!.name),
      v1VsLlamaServer: paired(v1!.name, llama!.name),
    };
    console.log(`bench-random-135m-q4_0, ${TOKENS} tokens, ${ROUNDS} rounds, ${threads} thread(s) (batches ${batchThreads}), ${os.cpus().length} CPUs`);
    for (const s of summary) {
      console.log(`${s.name.padEnd(36)} TTFT ${s.ttftMs.toFixed(1).padStart(7)} ms   ${s.tokensPerSecond.toFixed(1).padStart(7)} tok/s   (${s.tokens} tokens)`);
    }
    console.log(`/v1 vs /api/chat: tok/s ×${ratios.v1VsApiChat.tokensPerSecond.toFixed(3)}, TTFT ×${ratios.v1VsApiChat.ttft.toFixed(3)} (>1 = /v1 faster)`);
    console.log(
      `/v1 vs llama-server: tok/s ×${ratios.v1VsLlamaServer.tokensPerSecond.toFixed(3)}, TTFT ×${ratios.v1VsLlamaServer.ttft.toFixed(3)} (>1 = /v1 faster)`,
    );
    console.log(
      `connections opened while timing: ${JSON.stringify(connections.opened)}; requests sent again on a new connection (timedPost): ${JSON.stringify(resent)}`,
    );
    if (args.json)
      await writeFile(
        args.json,
        JSON.stringify({ model: FIXTURE, tokens: TOKENS, rounds: ROUNDS, threads, summary, ratios, samples: Object.fromEntries(samples) }, null, 2),
      );
  } finally {
    server?.kill();
    await app.close();
  }
}

await main();
