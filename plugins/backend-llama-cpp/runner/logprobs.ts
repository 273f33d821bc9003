/**
 * Generation with log probabilities. node-llama-cpp's LlamaCompletion and LlamaChat do not report
 * what the sampler saw, so a request that asks for `logprobs` runs this loop on the slot's sequence
 * instead: `evaluateWithMetadata` samples each token with the request's settings (temperature,
 * top-k/p, min-p, seed, repeat penalty, grammar) and returns the probabilities the sampler chose
 * from, most likely first. A logprob is the natural log of that probability: after the sampler's
 * filters, so at temperature 0 it is the model's own distribution, and with top-k 40 only 40
 * tokens have one. The text goes through the same stop detection as the normal path; each `token`
 * event carries the entries of the tokens whose text it completes (the tokens of a stop sequence
 * send none). Requests without `logprobs` never come here.
 *
 * @module
 */
import { LlamaGrammarEvaluationState, LlamaText, type LlamaContextSequence, type LlamaGrammar, type LlamaModel, type Token } from 'node-llama-cpp';
import type { GeneratedLogprob, GenerationEvent, TokenLogprob } from 'lia/engine';
import { now, type Emit } from './generation.js';
import type { Stops } from './prompts.js';
import type { LlamaSampling } from './sampling.js';
import { StopDetector } from './stops.js';

/** What one logprobs generation needs. */
export interface LogprobsRun {
  model: LlamaModel;
  seq: LlamaContextSequence;
  /** The prompt as the sequence must hold it (BOS included where the vocabulary wants it). */
  tokens: Token[];
  stops: Stops;
  /** The request's own stop sequences (the `done` event names the one that ended the text). */
  requestStops: readonly string[];
  sampling: LlamaSampling;
  grammar: LlamaGrammar | undefined;
  maxTokens: number;
  /** Alternatives per token (0 to 20). */
  top: number;
  promptTokens: number;
  started: bigint;
  signal: AbortSignal;
  emit: Emit;
}

/** Runs the generation; returns the `done` event (not emitted) and the text sent. */
export async function generateWithLogprobs(run: LogprobsRun): Promise<{ done: Extract<GenerationEvent, { type: 'done' }>; text: string }> {
  const { model, seq, sampling, signal } = run;
  if (signal.aborted) throw signal.reason;
  // Keep the cached prefix, but evaluate at least the prompt's last token: its logits pick the first answer token.
  await seq.adaptStateToTokens(run.tokens.slice(0, -1), false);
  const input = run.tokens.slice(seq.nextTokenIndex);
  const tokenStops = run.stops.tokens.map((t) => LlamaText(t).tokenize(model.tokenizer, 'trimLeadingSpace')).filter((t) => t.length > 0);

  const generated: Token[] = [];
  const pending: GeneratedLogprob[] = [];
  let pendingTokens: Token[] = [];
  let text = '';
  const ctl = { stopped: false };
  // A JSON-schema grammar ends with a run of newlines the library treats as a stop (LlamaCompletion does the same).
  const grammarStops = (run.grammar?.stopGenerationTriggers ?? []).map((t) => LlamaText(t).toString()).filter((t) => t.length > 0);
  const detector = new StopDetector(
    [...run.requestStops, ...run.stops.texts, ...grammarStops],
    (chunk) => {
      text += chunk;
      run.emit({ type: 'token', text: chunk, logprobs: pending.splice(0) });
    },
    () => (ctl.stopped = true),
  );
  const penalty = sampling.repeatPenalty;
  const iterator = seq.evaluateWithMetadata(
    input,
    { probabilities: true },
    {
      temperature: sampling.temperature,
      topK: sampling.topK,
      topP: sampling.topP,
      minP: sampling.minP,
      seed: sampling.seed,
      ...(run.grammar ? { grammarEvaluationState: new LlamaGrammarEvaluationState({ model, grammar: run.grammar }) } : {}),
      ...(penalty
        ? {
            repeatPenalty: {
              punishTokens: () => generated.slice(-penalty.lastTokens),
              maxPunishTokens: penalty.lastTokens,
              penalty: penalty.penalty,
              frequencyPenalty: penalty.frequencyPenalty,
              presencePenalty: penalty.presencePenalty,
            },
          }
        : {}),
    },
  );
  let first = 0n;
  let reason: 'stop' | 'length' = 'stop';
  try {
    if (run.maxTokens <= 0) reason = 'length';
    else {
      for await (const step of iterator) {
        if (signal.aborted) throw signal.reason;
        if (first === 0n) first = now();
        const token = step.token;
        generated.push(token);
        if (tokenStops.some((stop) => endsWith(generated, stop))) break;
        // Each token's text as it reads after the ones before it (a SentencePiece word's leading space included).
        const before = [...run.tokens, ...generated.slice(0, -1)].slice(-8);
        pending.push(entry(model, token, step.probabilities, run.top, before));
        // Detokenize the tokens since the last whole character, in the context of the ones before.
        pendingTokens.push(token);
        const piece = model.detokenize(pendingTokens, false, [...run.tokens, ...generated.slice(0, -pendingTokens.length)].slice(-8));
        if (!piece.endsWith('\uFFFD')) {
          pendingTokens = [];
          detector.push(piece);
        }
        if (ctl.stopped) break;
        if (generated.length >= run.maxTokens) {
          reason = 'length';
          break;
        }
      }
    }
  } finally {
    await iterator.return(undefined);
  }
  if (signal.aborted) throw signal.reason;
  if (!ctl.stopped) detector.flush();
  if (ctl.stopped) reason = 'stop';
  const end = now();
  const firstAt = first === 0n ? end : first;
  const done: Extract<GenerationEvent, { type: 'done' }> = {
    type: 'done',
    reason,
    promptTokens: run.promptTokens,
    // The tokens of a grammar's stop run are not counted, as LlamaCompletion does not count them.
    completionTokens: generated.length - (detector.matched !== undefined && grammarStops.includes(detector.matched) ? pending.length : 0),
    promptEvalNs: Number(firstAt - run.started),
    evalNs: Number(end - firstAt),
  };
  const matched = detector.matched;
  if (matched !== undefined && run.requestStops.includes(matched)) done.stopSequence = matched;
  return { done, text };
}

/** The logprob entry of a sampled token: its own and the `top` most likely, most likely first. */
function entry(model: LlamaModel, token: Token, probabilities: Map<Token, number>, top: number, before: Token[]): GeneratedLogprob {
  const alternatives: TokenLogprob[] = [];
  for (const [t, p] of probabilities) {
    if (alternatives.length >= top) break;
    alternatives.push(piece(model, t, p, before));
  }
  return { ...piece(model, token, probabilities.get(token) ?? 0, before), top_logprobs: alternatives };
}

function piece(model: LlamaModel, token: Token, probability: number, before: Token[]): TokenLogprob {
  const text = model.detokenize([token], true, before);
  // A probability of 0 (a token the filters removed, which the sampler never picks) would be -Infinity, which JSON cannot carry.
  const logprob = probability > 0 ? Math.log(probability) : -9999;
  return { token: text, logprob: Math.min(0, logprob), bytes: [...Buffer.from(text, 'utf8')] };
}

function endsWith(tokens: readonly Token[], tail: readonly Token[]): boolean {
  if (tail.length > tokens.length) return false;
  for (let i = 1; i <= tail.length; i++) if (tokens[tokens.length - i] !== tail[tail.length - i]) return false;
  return true;
}
