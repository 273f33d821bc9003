/**
 * Maps Ollama sampling options onto node-llama-cpp generation options. Every field is passed
 * explicitly, because node-llama-cpp's own defaults (greedy, a repeat penalty over generated tokens
 * only) are not Ollama's.
 *
 * Defaults (Ollama's since August 2026): temperature 0.8, top_k 40, top_p 0.9, min_p 0, no repeat
 * penalty (repeat_penalty 1.0; a model's parameters or the request may set one, applied over the
 * last repeat_last_n = 64 tokens), presence/frequency penalty 0, a random seed. Ollama applied 1.1
 * to every model until then; llama.cpp, vLLM and OpenAI apply none.
 *
 * @module
 */
import type { SamplingOptions } from 'lia/engine';

/** Ollama's sampling defaults, as this backend applies them. */
export const SAMPLING_DEFAULTS = {
  temperature: 0.8,
  top_k: 40,
  top_p: 0.9,
  min_p: 0,
  repeat_penalty: 1.0,
  repeat_last_n: 64,
  presence_penalty: 0,
  frequency_penalty: 0,
} as const;

/** The subset of node-llama-cpp's generation options that sampling controls. */
export interface LlamaSampling {
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  seed: number;
  repeatPenalty: false | { penalty: number; lastTokens: number; presencePenalty: number; frequencyPenalty: number; penalizeNewLine: boolean };
  customStopTriggers: string[];
}

/**
 * Converts options to node-llama-cpp's names. `contextLength` resolves `repeat_last_n: -1`
 * (Ollama: the whole context).
 */
export function toLlamaSampling(options: SamplingOptions, contextLength: number): LlamaSampling {
  const d = SAMPLING_DEFAULTS;
  const penalty = options.repeat_penalty ?? d.repeat_penalty;
  const presence = options.presence_penalty ?? d.presence_penalty;
  const frequency = options.frequency_penalty ?? d.frequency_penalty;
  const lastN = options.repeat_last_n ?? d.repeat_last_n;
  const lastTokens = lastN < 0 ? contextLength : lastN;
  const penaltyOff = lastTokens === 0 || (penalty === 1 && presence === 0 && frequency === 0);
  const seed = options.seed;
  return {
    temperature: Math.max(0, options.temperature ?? d.temperature),
    // node-llama-cpp: topK 0 and topP 1 disable the filter, as in llama.cpp.
    topK: Math.max(0, Math.trunc(options.top_k ?? d.top_k)),
    topP: clamp(options.top_p ?? d.top_p, 0, 1),
    minP: clamp(options.min_p ?? d.min_p, 0, 1),
    // Ollama: a negative seed (the default -1) means a random one.
    seed: seed === undefined || seed < 0 ? Math.floor(Math.random() * 2 ** 31) : Math.trunc(seed),
    repeatPenalty: penaltyOff ? false : { penalty, lastTokens, presencePenalty: presence, frequencyPenalty: frequency, penalizeNewLine: true },
    customStopTriggers: (options.stop ?? []).filter((s) => s.length > 0),
  };
}

/**
 * The token budget of one generation: `num_predict` when positive (Ollama: -1 and -2 mean "until
 * the context is full"), never more than the context has left after the prompt.
 */
export function maxTokensFor(options: SamplingOptions, contextLength: number, promptTokens: number): number {
  const left = Math.max(0, contextLength - promptTokens);
  const wanted = options.num_predict;
  return wanted !== undefined && wanted > 0 ? Math.min(Math.trunc(wanted), left) : left;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, v));
}
