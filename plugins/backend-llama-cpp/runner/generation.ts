/**
 * One generation call, wrapped: chunked prompt prefill that an abort can interrupt, text-level stop
 * sequences, and the timings and token counts of the `done` event.
 *
 * @module
 */
import type { LlamaContextSequence, Token } from 'node-llama-cpp';
import type { GenerationEvent } from 'lia/engine';
import { StopDetector } from './stops.js';

/** Receives the events of one generation. */
export type Emit = (event: GenerationEvent) => void;

/** Prompts longer than this many uncached tokens are evaluated in chunks, so an abort lands fast. */
const PREFILL_CHUNK = 256;

/**
 * Options for every `LlamaCompletion` call: the whole prompt is evaluated as given. The library
 * otherwise keeps a tenth of the context free for a context shift and cuts the beginning of any
 * prompt longer than the other nine tenths, silently: a conversation grown past 90 % of its
 * context lost its system prompt's first tokens and, the cut prompt sharing no prefix with the
 * cache, was evaluated again in full. The runner checks a prompt's length itself (prompts.ts drops
 * old messages or answers 400), the answer stops at the end of the context, and the cache is never
 * shifted, so no room is kept back (llama-server keeps none either).
 */
export const WHOLE_PROMPT = { disableContextShift: true, contextShiftSize: 1 } as const;

/** A monotonic clock in nanoseconds. */
export const now = (): bigint => process.hrtime.bigint();

/**
 * Evaluates the uncached part of a long prompt in chunks, checking the abort signal between them.
 * node-llama-cpp does not cancel a prompt already queued for decoding (an abort rejects only after
 * every queued chunk has been decoded), so a
 * client that leaves mid-prefill would otherwise hold the sequence until the whole prompt is done.
 * The generation call that follows finds these tokens cached and evaluates only the last one.
 */
export async function prefill(seq: LlamaContextSequence, tokens: Token[], signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw signal.reason;
  const start = seq.compareContextTokens(tokens).firstDifferentIndex;
  const end = tokens.length - 1;
  if (end - start <= PREFILL_CHUNK) return;
  if (start < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{ start, end: seq.nextTokenIndex }]);
  for (let i = start; i < end; i += PREFILL_CHUNK) {
    if (signal.aborted) throw signal.reason;
    await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(i, Math.min(end, i + PREFILL_CHUNK)));
  }
  if (signal.aborted) throw signal.reason;
}

/**
 * Starts counting the prompt tokens one request evaluates on `seq`; the returned function sets the
 * `done` event's `cachedTokens` to the rest of its prompt. The count is node-llama-cpp's public
 * token meter of the sequence: every token decoded without logits is an input token, and a prompt
 * is all such tokens but its last, whose logits pick the first answer token (generated tokens all
 * have logits). So it counts what was decoded, whatever cut or re-evaluation happened on the way,
 * not what the cache was expected to hold. Tokens copied from another sequence's cache count as
 * cached.
 *
 * On a sequence with a token predictor (speculative decoding, session.ts), it also sets the
 * event's `draft`: the predictions the sequence checked for this request (node-llama-cpp's
 * `validated` + `refuted`) and, of them, those it accepted (`validated`).
 */
export function meterPrompt(seq: LlamaContextSequence): (event: GenerationEvent) => GenerationEvent {
  const before = seq.tokenMeter.usedInputTokens;
  const predicted = seq.tokenPredictor ? seq.tokenPredictions : null;
  return (event) => {
    if (event.type === 'done') {
      const evaluated = Math.min(event.promptTokens, seq.tokenMeter.usedInputTokens - before + 1);
      event.cachedTokens = Math.max(0, event.promptTokens - evaluated);
      if (predicted) {
        const now = seq.tokenPredictions;
        const accepted = now.validated - predicted.validated;
        event.draft = { tokens: accepted + now.refuted - predicted.refuted, accepted };
      }
    }
    return event;
  };
}

/** What {@link generation} hands to the library call: streaming hooks and the abort signal. */
export interface GenerationHooks {
  signal: AbortSignal;
  stopOnAbortSignal: true;
  onToken(tokens: Token[]): void;
  onTextChunk(text: string): void;
}

/**
 * The text-level stop sequences of one call: the request's own (`options.stop`), which the `done`
 * event names when one ends the text, and the chat format's text stops, which it does not.
 */
export interface CallStops {
  request: readonly string[];
  format?: readonly string[];
}

/**
 * Runs one library generation call with text-level stop sequences (see stops.ts), measured timings
 * and token counts. A stop sequence ends the call through its own abort signal; the client's abort
 * (`signal`) throws. Returns the library's result (undefined when a stop sequence cut it short)
 * and the `done` event to send after anything else. `firstText`, when given, re-detokenizes the
 * first generated tokens in the context of the prompt (see the comment at its use).
 */
export async function generation<R extends { metadata: { stopReason: string } }>(
  signal: AbortSignal,
  stops: CallStops,
  emit: Emit,
  started: bigint,
  promptTokens: number,
  call: (hooks: GenerationHooks) => Promise<R>,
  firstText?: (tokens: Token[]) => string,
): Promise<{ result: R | undefined; done: GenerationEvent }> {
  const ctl = new AbortController();
  const onAbort = () => ctl.abort(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  let first = 0n;
  let count = 0;
  let firstTokens: Token[] | null = [];
  const detector = new StopDetector(
    [...stops.request, ...(stops.format ?? [])],
    (text) => emit({ type: 'token', text }),
    () => ctl.abort(new Error('stop sequence')),
  );
  let result: R | undefined;
  try {
    result = await call({
      signal: ctl.signal,
      stopOnAbortSignal: true,
      onToken(tokens) {
        if (first === 0n) first = now();
        count += tokens.length;
        firstTokens?.push(...tokens);
      },
      onTextChunk: (text) => {
        // The library detokenizes the first tokens without the prompt before them, which drops a
        // SentencePiece word's leading space ("Once upon" + "a time"); `firstText` redoes it in context.
        if (firstTokens && firstText) text = firstText(firstTokens);
        firstTokens = null;
        detector.push(text);
      },
    });
  } catch (err) {
    // node-llama-cpp throws on an abort even with stopOnAbortSignal when nothing has been generated
    // yet; a stop sequence is fine.
    if (signal.aborted || !detector.stopped) throw err;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  if (signal.aborted) throw signal.reason;
  detector.flush();
  const end = now();
  const firstAt = first === 0n ? end : first;
  const reason = !detector.stopped && result?.metadata.stopReason === 'maxTokens' ? 'length' : 'stop';
  const done: Extract<GenerationEvent, { type: 'done' }> = {
    type: 'done',
    reason,
    promptTokens,
    completionTokens: count,
    promptEvalNs: Number(firstAt - started),
    evalNs: Number(end - firstAt),
  };
  const matched = detector.matched;
  if (matched !== undefined && stops.request.includes(matched)) done.stopSequence = matched;
  return { result, done };
}
