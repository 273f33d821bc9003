/**
 * Agent-turn latency: conversations that resend the same long system prompt every turn and add a
 * few hundred new tokens, one session alone and several at once, against llama-server with the same
 * model, threads, slots and context per slot (its prompt cache on, as by default), in the same run.
 *
 * Each phase runs `N` sessions concurrently (`--sessions 1,4`); every session sends `--turns`
 * streamed `/v1/chat/completions` requests one after another: the system prompt (about `--system`
 * tokens, shared by the sessions of a phase and new to both servers: its first words name the
 * phase), then per turn a user message of about `--turn` tokens of its own, `--predict` tokens
 * generated, the answer sent back as the assistant's message of the next turn. Per turn it records
 * the time to first token (request sent → first streamed content) and, from the final chunk's
 * `usage`, the prompt tokens, those the server found cached (`prompt_tokens_details.cached_tokens`;
 * both servers report it) and hence those it evaluated, against the turn's new tokens (the prompt
 * minus the previous turn's prompt and answer). Evaluated tokens are deterministic: a turn that
 * evaluates much more than its new tokens lost its history.
 *
 * `--barrier` starts every turn of a phase's sessions together (the first turns arrive together
 * anyway): later turns then meet the other sessions' later turns on both servers alike, whatever
 * the spread of the first turns left them.
 *
 * Figures: per phase and server the median time to first token of the first turns and of the later
 * ones, and the time until every turn of the phase was answered; ratios appliance ÷ llama-server
 * (below 1: the appliance answers sooner). With several sessions a later turn's time to first
 * token is mostly the other sessions' prompts and steps evaluated with it, so it depends on how the
 * sessions fell into step after their first turns; the last figure does not. The servers take
 * turns per phase, the order alternating between repetitions. Sizes are characters, about 4.2 per
 * token (the printed token counts are the servers' own).
 *
 * Run: `node --conditions=lia-source --import tsx bench/engine/agent-turns.ts [--model 1b-q4_0]
 * [--sessions 1,4] [--system 6300] [--turn 230] [--predict 32] [--turns 6] [--context 8192]
 * [--reps 1] [--barrier] [--engine llama-cpp|llama-server] [--only appliance|llama-server]
 * [--server PATH] [--json FILE]`; `--server` runs another llama-server binary than the one
 * bench/engine/llama-server.ts builds (on both sides); `--engine` names the appliance's GGUF
 * engine (`backends.gguf`): its backend-llama-server by default, or `llama-cpp`.
 *
 * @module
 */
import type { ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Dispatcher } from 'undici';
import { freePort, startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { keepAlivePool, timedPost } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { ENGINE_ONLY } from '../../test/helpers/plugin-sets.js';
import { ROOT } from '../../test/helpers/fixtures.js';
import { benchModelPath, createBenchModel, modelLabel } from '../models/models.js';
import { benchThreads, buildLlamaServer, startLlamaServer } from './llama-server.js';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: '1b-q4_0' },
    sessions: { type: 'string', default: '1,4' },
    system: { type: 'string', default: '6300' },
    turn: { type: 'string', default: '230' },
    predict: { type: 'string', default: '32' },
    turns: { type: 'string', default: '6' },
    context: { type: 'string', default: '8192' },
    reps: { type: 'string', default: '1' },
    barrier: { type: 'boolean', default: false },
    engine: { type: 'string', default: 'llama-server' },
    only: { type: 'string' },
    server: { type: 'string' },
    json: { type: 'string' },
  },
});
const SESSIONS = values.sessions.split(',').map(Number);
const SLOTS = Math.max(...SESSIONS);
const SYSTEM_TOKENS = Number(values.system);
const TURN_TOKENS = Number(values.turn);
const PREDICT = Number(values.predict);
const TURNS = Number(values.turns);
const CONTEXT = Number(values.context);
const REPS = Number(values.reps);
const CHARS_PER_TOKEN = 4.2;
const { threads: THREADS, batchThreads: BATCH_THREADS } = benchThreads();

const SYSTEM_SENTENCES = [
  'You are a coding agent working in the repository of a small accounting office.',
  'You may call the tools read_file, write_file, list_directory, run_tests and search_code; describe each call before making it.',
  'Keep every change small, explain why it is needed, and never touch files outside the repository.',
  'When a test fails, read its output carefully, find the cause in the code, and fix the cause rather than the test.',
  'Tool read_file takes a path relative to the repository root and returns the text of the file with line numbers.',
  'Tool run_tests takes a list of test files and returns the output of the test runner, including every failure.',
];
const USER_SENTENCES = [
  'The invoice export still rounds the value added tax of each line instead of the total.',
  'Here is the output of the last test run, with the two failures in the ledger module.',
  'Please look at the function that formats the dates in the quarterly report as well.',
  'The customer numbers in the import file have leading zeros that the parser drops.',
  'After that, update the changelog and tell me which files you changed and why.',
];

/** Text of about `tokens` tokens: `head`, then `sentences` in turn. */
function text(head: string, sentences: readonly string[], tokens: number): string {
  let out = head;
  for (let i = 0; out.length < tokens * CHARS_PER_TOKEN; i++) out += ` ${sentences[i % sentences.length]}`;
  return out;
}

interface Message {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One turn as the client saw it. */
interface Turn {
  session: number;
  turn: number;
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
  /** Prompt tokens the server evaluated (prompt minus cached). */
  evaluated: number;
  /** Prompt tokens that neither the previous turn's prompt nor its answer held. */
  newTokens: number;
  completionTokens: number;
  /** When the request was sent and its stream ended, ms from the phase's start. */
  sentMs: number;
  endMs: number;
}

interface Target {
  name: 'appliance' | 'llama-server';
  url: string;
  headers: Record<string, string>;
  dispatcher: Dispatcher;
  /** Fields of the request body besides messages and streaming. */
  body: Record<string, unknown>;
}

interface Chunk {
  choices?: { delta?: { content?: string | null; reasoning_content?: string | null } }[];
  usage?: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
  timings?: { cache_n?: number; prompt_n?: number };
}

/** One streamed request: time to first content, the answer, and the final usage. */
async function ask(
  target: Target,
  messages: Message[],
): Promise<{ ttftMs: number; t0: number; answer: string; usage: NonNullable<Chunk['usage']>; cached: number }> {
  const body = JSON.stringify({ ...target.body, messages, stream: true, stream_options: { include_usage: true }, max_tokens: PREDICT });
  const { res, t0 } = await timedPost(`${target.url}/v1/chat/completions`, { dispatcher: target.dispatcher, headers: target.headers, body });
  if (res.statusCode !== 200) throw new Error(`${target.name}: HTTP ${res.statusCode}: ${await res.body.text()}`);
  let first = 0;
  let answer = '';
  let usage: Chunk['usage'];
  let timings: Chunk['timings'];
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body as AsyncIterable<Buffer>) {
    buffer += decoder.decode(bytes, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (!line.startsWith('data: ') || line === 'data: [DONE]') continue;
      const chunk = JSON.parse(line.slice(6)) as Chunk;
      const delta = chunk.choices?.[0]?.delta;
      const piece = (delta?.content ?? '') + (delta?.reasoning_content ?? '');
      if (piece && first === 0) first = performance.now();
      answer += delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
      if (chunk.timings) timings = chunk.timings;
    }
  }
  if (!usage) throw new Error(`${target.name}: no usage in the stream`);
  if (first === 0) first = performance.now();
  const cached = usage.prompt_tokens_details?.cached_tokens ?? timings?.cache_n;
  if (cached === undefined) throw new Error(`${target.name}: the stream reports no cached prompt tokens`);
  return { ttftMs: first - t0, t0, answer, usage, cached };
}

/** A barrier for `n` parties, reusable turn after turn. */
function barrier(n: number): () => Promise<void> {
  let waiting: (() => void)[] = [];
  return () =>
    new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (waiting.length === n) {
        const all = waiting;
        waiting = [];
        for (const r of all) r();
      }
    });
}

/** `n` sessions of {@link TURNS} turns each, concurrently, sharing the system prompt `system`. */
async function phase(target: Target, n: number, system: string, tag: string): Promise<Turn[]> {
  const start = performance.now();
  const sync = values.barrier ? barrier(n) : async () => {};
  const session = async (s: number): Promise<Turn[]> => {
    const messages: Message[] = [{ role: 'system', content: system }];
    const turns: Turn[] = [];
    let previous = 0;
    for (let k = 1; k <= TURNS; k++) {
      messages.push({ role: 'user', content: text(`Session ${tag}-${s}, turn ${k}.`, USER_SENTENCES.slice(s % 2), TURN_TOKENS) });
      await sync();
      const r = await ask(target, messages);
      const end = performance.now();
      turns.push({
        session: s,
        turn: k,
        ttftMs: r.ttftMs,
        promptTokens: r.usage.prompt_tokens,
        cachedTokens: r.cached,
        evaluated: r.usage.prompt_tokens - r.cached,
        newTokens: r.usage.prompt_tokens - previous,
        completionTokens: r.usage.completion_tokens,
        sentMs: r.t0 - start,
        endMs: end - start,
      });
      previous = r.usage.prompt_tokens + r.usage.completion_tokens;
      messages.push({ role: 'assistant', content: r.answer });
    }
    return turns;
  };
  return (await Promise.all(Array.from({ length: n }, (_, s) => session(s)))).flat();
}

const fmt = (ms: number): string => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);

async function main(): Promise<void> {
  const model = await benchModelPath(values.model);
  const names = values.only ? [values.only] : ['appliance', 'llama-server'];
  const loadavg = os.loadavg();
  const targets: Target[] = [];
  let server: ChildProcess | undefined;
  let app: ApplianceProcess | undefined;
  // Both servers get the same sampling fields; llama-server reads the ones OpenAI lacks too.
  const sampling = { temperature: 0.8, top_p: 0.9, seed: 42 };
  try {
    if (names.includes('llama-server')) {
      const port = await freePort();
      server = await startLlamaServer(values.server ?? (await buildLlamaServer()), {
        model,
        port,
        threads: THREADS,
        batchThreads: BATCH_THREADS,
        parallel: SLOTS,
        contextPerSlot: CONTEXT,
        jinja: true,
      });
      const url = `http://127.0.0.1:${port}`;
      targets.push({
        name: 'llama-server',
        url,
        headers: {},
        dispatcher: keepAlivePool(url),
        body: { model: 'bench', ...sampling, top_k: 40, min_p: 0, repeat_penalty: 1.0 },
      });
    }
    if (names.includes('appliance')) {
      app = await startApplianceProcess({
        // The appliance's engine for GGUF: node-llama-cpp (its default) or its managed llama-server.
        backends: { gguf: values.engine },
        plugins: {
          ...ENGINE_ONLY,
          'api-openai': {},
          ...(values.engine === 'llama-server' && values.server ? { 'backend-llama-server': { options: { binary: values.server } } } : {}),
          engine: { options: { numParallel: SLOTS, contextLength: CONTEXT, threads: THREADS, batchThreads: BATCH_THREADS, keepAlive: -1 } },
        },
      });
      await createBenchModel(app, 'bench', model);
      targets.push({
        name: 'appliance',
        url: app.url,
        headers: { authorization: `Bearer ${app.key}` },
        dispatcher: app.dispatcher(),
        body: { model: 'bench', ...sampling },
      });
    }
    // Warm-up: load, first allocations, connections; then a pause for the appliance's spare runner.
    for (const t of targets) {
      await Promise.all(Array.from({ length: SLOTS }, (_, i) => ask(t, [{ role: 'user', content: `Warm-up ${i}: say hello.` }])));
      await new Promise((resolve) => setTimeout(resolve, 3000));
    }
    const results: { rep: number; sessions: number; target: string; turns: Turn[] }[] = [];
    let tag = 0;
    for (let r = 1; r <= REPS; r++) {
      for (const n of SESSIONS) {
        const order = r % 2 === 1 ? targets : [...targets].reverse();
        for (const t of order) {
          const id = `${process.pid}-${tag++}`;
          const system = text(`System prompt ${id}.`, SYSTEM_SENTENCES, SYSTEM_TOKENS);
          const turns = await phase(t, n, system, id);
          results.push({ rep: r, sessions: n, target: t.name, turns });
          const later = turns.filter((x) => x.turn > 1);
          console.error(
            `rep ${r}, ${n} session(s), ${t.name}: first turns ${fmt(median(turns.filter((x) => x.turn === 1).map((x) => x.ttftMs)))}, ` +
              `later turns median ${fmt(median(later.map((x) => x.ttftMs)))} (${fmt(Math.min(...later.map((x) => x.ttftMs)))}-${fmt(Math.max(...later.map((x) => x.ttftMs)))}), ` +
              `later turns evaluated ${later.map((x) => x.evaluated).join(' ')} of new ${later.map((x) => x.newTokens).join(' ')}`,
          );
        }
      }
    }
    report(model, loadavg, results);
    const file = values.json ?? path.join(ROOT, 'bench/results', `agent-turns-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(
      file,
      JSON.stringify(
        {
          model: modelLabel(model),
          engine: values.engine,
          cpu: os.cpus()[0]?.model,
          cores: os.availableParallelism(),
          loadavg,
          threads: THREADS,
          batchThreads: BATCH_THREADS,
          slots: SLOTS,
          context: CONTEXT,
          barrier: values.barrier,
          results,
        },
        null,
        2,
      ),
    );
    console.log(`\nraw turns: ${path.relative(ROOT, file)}`);
  } finally {
    server?.kill();
    await app?.close();
  }
}

/** Prints the per-phase medians, the ratios and each appliance turn's evaluated tokens. */
function report(model: string, loadavg: number[], results: { rep: number; sessions: number; target: string; turns: Turn[] }[]): void {
  console.log(
    `\n${modelLabel(model)}; ${os.cpus()[0]?.model}, ${os.availableParallelism()} cores, load average ${loadavg.map((x) => x.toFixed(2)).join(' ')} before the run; ` +
      `threads ${THREADS} (batches ${BATCH_THREADS}), ${SLOTS} slots × ${CONTEXT}; system prompt ~${SYSTEM_TOKENS} tokens, ${TURNS} turns of ~${TURN_TOKENS} new tokens, ${PREDICT} generated` +
      `${values.barrier ? '; each turn of a phase starts together (--barrier)' : ''}\n`,
  );
  console.log(
    '| rep | sessions | server | first turns, median TTFT (range) | later turns, median TTFT (range) | later turns: evaluated / new tokens (median, max) | all turns done |',
  );
  console.log('|---:|---:|---|---:|---:|---:|---:|');
  for (const row of results) {
    const first = row.turns.filter((x) => x.turn === 1).map((x) => x.ttftMs);
    const later = row.turns.filter((x) => x.turn > 1);
    const lt = later.map((x) => x.ttftMs);
    const ev = later.map((x) => x.evaluated);
    const nw = later.map((x) => x.newTokens);
    console.log(
      `| ${row.rep} | ${row.sessions} | ${row.target} | ${fmt(median(first))} (${fmt(Math.min(...first))}-${fmt(Math.max(...first))}) | ` +
        `${fmt(median(lt))} (${fmt(Math.min(...lt))}-${fmt(Math.max(...lt))}) | ${median(ev)} / ${median(nw)} (max ${Math.max(...ev)} / ${Math.max(...nw)}) | ` +
        `${fmt(Math.max(...row.turns.map((x) => x.endMs)))} |`,
    );
  }
  const pairs = results
    .filter((x) => x.target === 'appliance')
    .map((a) => [a, results.find((l) => l.target === 'llama-server' && l.rep === a.rep && l.sessions === a.sessions)] as const);
  if (pairs.some(([, l]) => l)) {
    console.log(
      '\n| rep | sessions | first turns: appliance ÷ llama-server | later turns: appliance ÷ llama-server | all turns done: appliance ÷ llama-server |',
    );
    console.log('|---:|---:|---:|---:|---:|');
    for (const [a, l] of pairs) {
      if (!l) continue;
      const m = (row: typeof a, later: boolean) => median(row.turns.filter((x) => x.turn > 1 === later).map((x) => x.ttftMs));
      const done = (row: typeof a) => Math.max(...row.turns.map((x) => x.endMs));
      console.log(
        `| ${a.rep} | ${a.sessions} | ${(m(a, false) / m(l, false)).toFixed(2)} | ${(m(a, true) / m(l, true)).toFixed(2)} | ${(done(a) / done(l)).toFixed(2)} |`,
      );
    }
  }
  console.log('\nPer turn (session.turn: TTFT, prompt tokens evaluated / new):');
  for (const row of results) {
    const line = [...row.turns]
      .sort((x, y) => x.turn - y.turn || x.session - y.session)
      .map((x) => `${x.session}.${x.turn} ${fmt(x.ttftMs)} ${x.evaluated}/${x.newTokens}`)
      .join(', ');
    console.log(`- rep ${row.rep}, ${row.sessions} session(s), ${row.target}: ${line}`);
  }
}

await main();
process.exit(0);
