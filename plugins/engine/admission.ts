/**
 * A request's admission for the principal that asks (`Principal.admit`: rate limits, concurrent
 * streams, a cap on the tokens generated), held from before the model is loaded until the answer
 * is over.
 *
 * @module
 */
import { currentPrincipal } from 'lia/plugin';
import type { Admission, SamplingOptions } from 'lia/plugin/contracts';

/** The asking principal's admission for one request: its label for events, and its release. */
export interface Admitted {
  label: { principal?: string };
  /** The prompt's tokens as estimated before it was tokenized ({@link estimateTokens}). */
  promptTokens: number;
  /** The request's options, `num_predict` lowered to the principal's cap. */
  options: SamplingOptions;
  /** The request's signal, also aborted when the principal's credential is withdrawn (revoked, rotated). */
  signal: AbortSignal;
  /** Called once the request is over, with the tokens it used when known; idempotent. */
  done: (usedTokens?: number) => void;
  /** {@link done} for a generation: its counts when it reported them, else the estimate and the tokens seen. */
  settle: (counts: { promptTokens: number; completionTokens: number } | null, tokensSeen: number) => void;
  /** Releases, then rethrows (for a failure before the generation starts). */
  fail: (err: unknown) => never;
}

/** A prompt's tokens before it is tokenized: one per 4 characters, rounded up (the usual rule of thumb for BPE vocabularies). */
export function estimateTokens(texts: ReadonlyArray<string | undefined>): number {
  return texts.reduce((sum, t) => sum + Math.ceil((t?.length ?? 0) / 4), 0);
}

/**
 * Admits the request for the current principal (`Principal.admit`: rate limits, concurrent
 * streams, a cap on the tokens generated), which throws to refuse it. Outside a request, or for a
 * principal without limits, everything is admitted. An embedding generates nothing (`maxTokens` 0).
 */
export function admitted(
  model: string,
  promptTokens: number,
  options: SamplingOptions,
  signal: AbortSignal,
  kind: 'generation' | 'embed' = 'generation',
): Admitted {
  const principal = currentPrincipal();
  const embedding = kind === 'embed';
  const asked = embedding ? 0 : options.num_predict !== undefined && options.num_predict >= 0 ? options.num_predict : null;
  const granted = principal?.admit?.(model, { promptTokens, maxTokens: asked });
  const admission: Admission | undefined = typeof granted === 'function' ? { release: granted } : granted;
  const cap = admission?.maxTokens;
  const capped = embedding || cap === undefined || (asked !== null && asked <= cap) ? options : { ...options, num_predict: cap };
  let released = false;
  const done = (usedTokens?: number): void => {
    if (released) return;
    released = true;
    admission?.release(usedTokens);
  };
  return {
    label: principal ? { principal: principal.id } : {},
    promptTokens,
    options: capped,
    signal: principal?.signal ? AbortSignal.any([signal, principal.signal]) : signal,
    done,
    settle: (counts, seen) => done(counts ? counts.promptTokens + counts.completionTokens : promptTokens + seen),
    fail: (err) => {
      done();
      throw err;
    },
  };
}
