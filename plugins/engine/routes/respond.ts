/**
 * Turns a {@link GenerationStream} into Ollama's answer: NDJSON chunks (the default) or one object
 * (`"stream": false`). The engine hands the stream over with its first event in hand, so a
 * failure before the first token (a runner crash, a bad schema) is a normal JSON error with its
 * status; a failure later is an `{"error"}` line. A client that goes away stops the generation at once.
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { pump, startNdjson } from 'lia/plugin';
import type { GeneratedLogprob, GenerationEvent, ToolCall } from '../public.js';
import type { GenerationStream } from '../public.js';

type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

/** How one surface (generate or chat) shapes its objects. */
export interface Shape {
  /** A chunk carrying text (and tool calls, for chat; or thinking, with empty text). */
  chunk(text: string, toolCalls?: ToolCall[], thinking?: string): Record<string, unknown>;
  /** The last object's content fields (empty text and thinking when streamed). */
  final(text: string, toolCalls: ToolCall[] | undefined, done: DoneEvent, thinking?: string): Record<string, unknown>;
}

/** Ollama's timestamp: RFC 3339 in UTC. */
export const createdAt = (): string => new Date().toISOString();

/**
 * The metrics of the last object, in nanoseconds; zero values are left out, as Ollama does. A model
 * loaded with speculative decoding adds `draft_count` and `draft_accepted_count` (LIA's names:
 * Ollama reports none), zeros included.
 */
export function metrics(done: DoneEvent, totalNs: number, loadNs: number): Record<string, unknown> {
  const all: Record<string, number> = {
    total_duration: totalNs,
    load_duration: loadNs,
    prompt_eval_count: done.promptTokens,
    prompt_eval_duration: done.promptEvalNs,
    eval_count: done.completionTokens,
    eval_duration: done.evalNs,
  };
  const draft = done.draft ? { draft_count: done.draft.tokens, draft_accepted_count: done.draft.accepted } : {};
  return { ...Object.fromEntries(Object.entries(all).filter(([, v]) => v > 0)), ...draft };
}

export async function respond(
  reply: FastifyReply,
  gen: GenerationStream,
  opts: { stream: boolean; started: bigint; model: string; shape: Shape },
): Promise<unknown> {
  const head = (): Record<string, unknown> => ({ model: opts.model, created_at: createdAt() });
  const last = (done: DoneEvent, text: string, calls: ToolCall[] | undefined, thinking?: string) => ({
    ...head(),
    ...opts.shape.final(text, calls, done, thinking),
    done: true,
    done_reason: done.reason,
    ...metrics(done, Number(process.hrtime.bigint() - opts.started), gen.loadNs),
  });

  const { events } = gen;

  if (!opts.stream) {
    let text = '';
    let thinking = '';
    const calls: ToolCall[] = [];
    let logprobs: GeneratedLogprob[] | undefined;
    for await (const e of events) {
      if (e.type === 'token' || e.type === 'thinking') {
        if (e.type === 'token') text += e.text;
        else thinking += e.text;
        if (e.logprobs) (logprobs ??= []).push(...e.logprobs);
      } else if (e.type === 'tool_calls') calls.push(...e.calls);
      else {
        const body = { ...last(e, text, calls.length ? calls : undefined, thinking), ...logprobsOf(logprobs) };
        return reply.type('application/json; charset=utf-8').send(body);
      }
    }
    throw new Error('the generation ended without a done event');
  }

  const out = startNdjson<Record<string, unknown>>(reply);
  const line = (e: GenerationEvent): Record<string, unknown> => {
    if (e.type === 'token') return { ...head(), ...opts.shape.chunk(e.text), ...logprobsOf(e.logprobs), done: false };
    if (e.type === 'thinking') return { ...head(), ...opts.shape.chunk('', undefined, e.text), ...logprobsOf(e.logprobs), done: false };
    if (e.type === 'tool_calls') return { ...head(), ...opts.shape.chunk('', e.calls), done: false };
    return last(e, '', undefined);
  };
  await pump(out, events, { next: (e) => [line(e)] });
  return reply;
}

/** Ollama's `logprobs` field: each token's entry, `top_logprobs` left out when none were asked for. */
function logprobsOf(logprobs: GeneratedLogprob[] | undefined): { logprobs?: unknown[] } {
  if (!logprobs) return {};
  return { logprobs: logprobs.map((l) => (l.top_logprobs.length > 0 ? l : { token: l.token, logprob: l.logprob, bytes: l.bytes })) };
}
