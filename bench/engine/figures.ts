/**
 * The engine benchmark's figures for one target, measured the same way for the appliance,
 * llama-server and the in-process library (run.ts, library.ts): single-stream decode tokens/s
 * and time to first token (medians of 5 requests one after another), then aggregate tokens/s of 4
 * and of 16 concurrent streams (all tokens over the wall time of the wave), and the time to first
 * token of a long prompt no cache holds (about 512 tokens; median of 3, one token generated).
 *
 * @module
 */
import { median } from '../lib/stats.js';

/** The prompt every target generates from (raw text, no template). */
export const PROMPT = 'Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker who';

/** Sentence repeats of {@link longPrompt}: 51 × 10 tokens plus the marker, about 512 with the Llama-2 vocabulary. */
const LONG_REPEATS = 51;
let fresh = 0;

/** A prompt of about 512 tokens that starts with a word no earlier one did, so that no cache holds any of it. */
export const longPrompt = (): string => `Request${process.pid}x${fresh++} ${'The cat and the dog played in the park. '.repeat(LONG_REPEATS)}`;

/**
 * The sampling every target gets, in Ollama's option names (llama-server's `/completion` takes the
 * same ones): the appliance's defaults, with a fixed seed.
 */
export const SAMPLING = { temperature: 0.8, top_k: 40, top_p: 0.9, min_p: 0, repeat_penalty: 1.0, repeat_last_n: 64, seed: 42 } as const;

/** One streamed generation, timed where its tokens arrive (milliseconds, `performance.now()`). */
export interface Stream {
  ttftMs: number;
  /** First to last token. */
  decodeMs: number;
  tokens: number;
  endMs: number;
}

export interface Figures {
  decode: number;
  ttft: number;
  agg4: number;
  agg16: number;
  /** 64 concurrent streams, measured only for a target with 64 slots or more (NaN otherwise). */
  agg64: number;
  /** Time to first token of a ~512-token prompt, nothing cached (ms). */
  ttftLong: number;
}

/** One generation: `prompt` (default {@link PROMPT}) and `predict` tokens (default: the run's count). */
export type Generate = (prompt?: string, predict?: number) => Promise<Stream>;

/** Tokens per second after the first, from the median token count and the median decode time of `runs`; 0 below two tokens. */
export function decodeRate(runs: readonly Stream[]): number {
  const tokens = median(runs.map((s) => s.tokens));
  return tokens > 1 ? ((tokens - 1) / median(runs.map((s) => s.decodeMs))) * 1000 : 0;
}

/** Measures the figures; `generate` runs one generation (and waits for whatever it needs first). */
export async function measureFigures(generate: Generate, slots = 16): Promise<Figures> {
  const single: Stream[] = [];
  for (let i = 0; i < 5; i++) single.push(await generate());
  const decode = decodeRate(single);
  const ttft = median(single.map((s) => s.ttftMs));
  const aggregate = async (n: number): Promise<number> => {
    const t0 = performance.now();
    const runs = await Promise.all(Array.from({ length: n }, () => generate()));
    return (runs.reduce((s, r) => s + r.tokens, 0) / (Math.max(...runs.map((r) => r.endMs)) - t0)) * 1000;
  };
  const agg4 = await aggregate(4);
  const agg16 = await aggregate(16);
  const agg64 = slots >= 64 ? await aggregate(64) : NaN;
  const long: number[] = [];
  for (let i = 0; i < 3; i++) long.push((await generate(longPrompt(), 1)).ttftMs);
  return { decode, ttft, agg4, agg16, agg64, ttftLong: median(long) };
}
