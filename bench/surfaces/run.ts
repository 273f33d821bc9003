/**
 * The cost of each translator: one appliance, one model, one conversation, streamed through
 * `/api/chat` (the native path), `/v1/chat/completions`, `/v1/responses` and `/v1/messages`, and
 * each translator's time to first token and streamed tokens/s as a ratio to `/api/chat`'s.
 *
 * Figures per surface: time to first token (request sent → first non-empty text) and streamed
 * tokens/s (output tokens after the first ÷ time from the first text to the last). Workload: one
 * request at a time, 128 tokens (`bench-random-135m-q4_0.gguf` has random weights and rarely
 * stops early), temperature 0.8. Rounds alternate the surfaces in the four orders of a balanced
 * Latin square (each surface runs in each position, and follows each other one, once per four
 * rounds), so drift on a shared machine hits all alike. A ratio is the median of the ratios
 * within a round (`/api/chat`'s TTFT ÷ the surface's, the surface's tokens/s ÷ `/api/chat`'s:
 * above 1 the translator is faster), with the 25th and 75th percentiles as its spread. All
 * requests go over HTTPS with the key and kept-open connections, read by undici's `request` (as
 * bench/openai/chat-stream.ts).
 *
 * Run: `npm run build && node --conditions=lia-source --import tsx bench/surfaces/run.ts [--rounds 12] [--tokens 128] [--json FILE]`
 *
 * @module
 */
import { writeFile } from 'node:fs/promises';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { timedPost } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { createModel } from '../../test/helpers/models.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '12' },
    tokens: { type: 'string', default: '128' },
    json: { type: 'string' },
  },
});
const ROUNDS = Number(args.rounds);
const TOKENS = Number(args.tokens);
const FIXTURE = 'gguf/bench-random-135m-q4_0.gguf';
const SYSTEM = 'You are a storyteller.';
const USER = 'Write a long story about a dragon who learns to bake bread.';
const TEMPERATURE = 0.8;

/** What one stream line says: text, the output token count, or neither. */
type Parsed = { text?: string; tokens?: number };

interface Surface {
  name: string;
  path: string;
  body: unknown;
  headers?: Record<string, string>;
  parse(line: string): Parsed;
}

interface Sample {
  ttftMs: number;
  tokensPerSecond: number;
  tokens: number;
}

const data = (line: string): Record<string, unknown> | null => (line.startsWith('data: ') && line !== 'data: [DONE]' ? JSON.parse(line.slice(6)) : null);

const SURFACES: Surface[] = [
  {
    name: '/api/chat',
    path: '/api/chat',
    body: {
      model: 'bench',
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: USER },
      ],
      stream: true,
      options: { num_predict: TOKENS, temperature: TEMPERATURE },
    },
    parse(line) {
      if (!line) return {};
      const o = JSON.parse(line) as { message?: { content?: string }; done?: boolean; eval_count?: number };
      return { ...(o.message?.content ? { text: o.message.content } : {}), ...(o.done ? { tokens: o.eval_count ?? 0 } : {}) };
    },
  },
  {
    name: '/v1/chat/completions',
    path: '/v1/chat/completions',
    body: {
      model: 'bench',
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'user', content: USER },
      ],
      max_tokens: TOKENS,
      temperature: TEMPERATURE,
      stream: true,
      stream_options: { include_usage: true },
    },
    parse(line) {
      const c = data(line) as { choices?: { delta?: { content?: string } }[]; usage?: { completion_tokens: number } } | null;
      if (!c) return {};
      const text = c.choices?.[0]?.delta?.content;
      return { ...(text ? { text } : {}), ...(c.usage ? { tokens: c.usage.completion_tokens } : {}) };
    },
  },
  {
    name: '/v1/responses',
    path: '/v1/responses',
    body: { model: 'bench', instructions: SYSTEM, input: USER, max_output_tokens: TOKENS, temperature: TEMPERATURE, stream: true },
    parse(line) {
      const e = data(line) as { type?: string; delta?: string; response?: { usage?: { output_tokens: number } } } | null;
      if (!e) return {};
      if (e.type === 'response.output_text.delta' && e.delta) return { text: e.delta };
      // Cut by max_output_tokens, the stream ends with response.incomplete.
      if (e.type === 'response.completed' || e.type === 'response.incomplete') return { tokens: e.response?.usage?.output_tokens ?? 0 };
      return {};
    },
  },
  {
    name: '/v1/messages',
    path: '/v1/messages',
    headers: { 'anthropic-version': '2023-06-01' },
    body: { model: 'bench', system: SYSTEM, messages: [{ role: 'user', content: USER }], max_tokens: TOKENS, temperature: TEMPERATURE, stream: true },
    parse(line) {
      const e = data(line) as { type?: string; delta?: { type?: string; text?: string }; usage?: { output_tokens: number } } | null;
      if (!e) return {};
      if (e.type === 'content_block_delta' && e.delta?.type === 'text_delta' && e.delta.text) return { text: e.delta.text };
      if (e.type === 'message_delta') return { tokens: e.usage?.output_tokens ?? 0 };
      return {};
    },
  },
];

/** A balanced Latin square for four: each surface once per position and after each other once. */
const ORDERS = [
  [0, 1, 3, 2],
  [1, 2, 0, 3],
  [2, 3, 1, 0],
  [3, 0, 2, 1],
];

function quantile(xs: readonly number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  const at = (s.length - 1) * q;
  const lo = Math.floor(at);
  return s[lo]! + (s[Math.min(lo + 1, s.length - 1)]! - s[lo]!) * (at - lo);
}

async function main(): Promise<void> {
  const app = await startApplianceProcess({ plugins: { 'host-network': false, 'host-gpu': false, 'host-services': false, webui: false } });
  try {
    await createModel(app, 'bench', FIXTURE);
    const auth = { authorization: `Bearer ${app.key}` };
    const measure = async (s: Surface): Promise<Sample> => {
      const { res, t0 } = await timedPost(`${app.url}${s.path}`, {
        dispatcher: app.dispatcher(),
        headers: { ...auth, ...s.headers },
        body: JSON.stringify(s.body),
      });
      if (res.statusCode !== 200) throw new Error(`${s.name}: ${res.statusCode} ${await res.body.text()}`);
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
          const p = s.parse(line.trim());
          if (p.text) {
            if (first === 0) first = now;
            last = now;
          }
          if (p.tokens !== undefined) tokens = p.tokens;
        }
      }
      if (first === 0 || tokens < 2) throw new Error(`${s.name}: no tokens streamed`);
      return { ttftMs: first - t0, tokensPerSecond: ((tokens - 1) / (last - first)) * 1000, tokens };
    };

    // Warm-up: the load, caches, JIT and connections; then a pause for the spare runner the
    // appliance starts once it has been quiet for a second, so that it lands in nobody's figures.
    for (const s of SURFACES) await measure(s);
    await new Promise((resolve) => setTimeout(resolve, 4000));

    const samples = SURFACES.map((): Sample[] => []);
    for (let r = 0; r < ROUNDS; r++) {
      const order = ORDERS[r % ORDERS.length]!;
      const round: Sample[] = [];
      for (const i of order) round[i] = await measure(SURFACES[i]!);
      round.forEach((x, i) => samples[i]!.push(x));
    }

    const base = samples[0]!;
    const rows = SURFACES.map((s, i) => {
      const xs = samples[i]!;
      const speed = xs.map((x, r) => x.tokensPerSecond / base[r]!.tokensPerSecond);
      const ttft = xs.map((x, r) => base[r]!.ttftMs / x.ttftMs);
      return {
        name: s.name,
        ttftMs: median(xs.map((x) => x.ttftMs)),
        tokensPerSecond: median(xs.map((x) => x.tokensPerSecond)),
        tokens: median(xs.map((x) => x.tokens)),
        ttftRatio: { median: median(ttft), p25: quantile(ttft, 0.25), p75: quantile(ttft, 0.75) },
        speedRatio: { median: median(speed), p25: quantile(speed, 0.25), p75: quantile(speed, 0.75) },
      };
    });
    console.log(`bench-random-135m-q4_0, ${TOKENS} tokens, ${ROUNDS} rounds, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'})`);
    console.log('surface                  TTFT ms   tok/s   TTFT ratio (p25–p75)     tok/s ratio (p25–p75)');
    for (const r of rows) {
      const ratio = (x: { median: number; p25: number; p75: number }) => `×${x.median.toFixed(3)} (${x.p25.toFixed(3)}–${x.p75.toFixed(3)})`;
      console.log(
        `${r.name.padEnd(22)} ${r.ttftMs.toFixed(1).padStart(8)} ${r.tokensPerSecond.toFixed(1).padStart(7)}   ${ratio(r.ttftRatio).padEnd(24)} ${ratio(r.speedRatio)}`,
      );
    }
    if (args.json)
      await writeFile(
        args.json,
        JSON.stringify(
          { model: FIXTURE, tokens: TOKENS, rounds: ROUNDS, rows, samples: Object.fromEntries(SURFACES.map((s, i) => [s.name, samples[i]])) },
          null,
          2,
        ),
      );
  } finally {
    await app.close();
  }
}

await main();
