/**
 * A conversation longer than the model's trained context, on llama-server: it loses its oldest
 * messages until it fits, as Ollama truncates a chat and backend-llama-cpp does: system messages
 * and the last message always stay; when even those do not fit, the request keeps its 400.
 *
 * Only at the trained context: below it, the engine loads the model again with a larger context
 * (its context growth) on the same 400, so the whole conversation is kept while memory allows.
 * The prompt is measured the way the server will evaluate it, rendered by the model's template
 * (`/apply-template`) and counted by its tokenizer (`/tokenize`), and the cut is found by bisection
 * (a few measurements, not one per message). Nothing is measured for a conversation that fits.
 *
 * @module
 */
import { isAppError } from 'lia/plugin';
import type { ChatParams, GenerationEvent } from 'lia/plugin/contracts';
import { renderChat } from './constrained.js';
import type { LlamaServer } from './server.js';

/**
 * The events of `run(p)`; when it is refused before its first event for want of context while the
 * server already has the model's trained context, those of `run` with the newest messages that fit.
 */
export async function* fitted(
  server: LlamaServer,
  model: string,
  p: ChatParams,
  run: (p: ChatParams) => AsyncIterable<GenerationEvent>,
  signal: AbortSignal,
): AsyncIterable<GenerationEvent> {
  let started = false;
  try {
    for await (const event of run(p)) {
      started = true;
      yield event;
    }
    return;
  } catch (err) {
    const atLimit = server.trainedContext > 0 && server.contextPerSlot >= server.trainedContext;
    if (started || !atLimit || !isAppError(err) || err.code !== 'LIA_ERR_CONTEXT_LENGTH_EXCEEDED') throw err;
    const shorter = await newestThatFit(server, model, p, signal);
    if (!shorter) throw err;
    yield* run(shorter);
  }
}

/** The request with the fewest oldest messages dropped that fits the context; null when none does. */
async function newestThatFit(server: LlamaServer, model: string, p: ChatParams, signal: AbortSignal): Promise<ChatParams | null> {
  const droppable = p.messages.flatMap((m, i) => (m.role !== 'system' && i < p.messages.length - 1 ? [i] : []));
  const without = (n: number): ChatParams => {
    const dropped = new Set(droppable.slice(0, n));
    return { ...p, messages: p.messages.filter((_, i) => !dropped.has(i)) };
  };
  const fits = async (q: ChatParams) => (await promptLength(server, model, q, signal)) < server.contextPerSlot;
  if (droppable.length === 0 || !(await fits(without(droppable.length)))) return null;
  // fits(without(hi)) holds and fits(without(lo)) does not (the whole conversation was refused).
  let lo = 0;
  let hi = droppable.length;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (await fits(without(mid))) hi = mid;
    else lo = mid;
  }
  return without(hi);
}

/** A conversation's prompt length as the server evaluates it (BOS included). */
async function promptLength(server: LlamaServer, model: string, p: ChatParams, signal: AbortSignal): Promise<number> {
  const prompt = await renderChat(server, model, p, signal);
  const { tokens } = (await server.fetchJson('POST', '/tokenize', { content: prompt, add_special: true, parse_special: true }, signal)) as {
    tokens?: unknown[];
  };
  return tokens?.length ?? 0;
}
