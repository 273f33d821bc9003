/**
 * What a flavour (an upstream's API) does: turn the engine's native parameters into its request,
 * and its streamed answer back into the engine's events. Every upstream request streams, even for
 * a client that asked for one answer: the engine gathers the events, and the first event tells
 * the replica logic that the answer has started (after it, no retry).
 *
 * @module
 */
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent } from 'lia/plugin';

export interface UpstreamCall {
  path: string;
  body: Record<string, unknown>;
}

export interface Flavour {
  chat(model: string, params: ChatParams): UpstreamCall;
  generate(model: string, params: GenerateParams): UpstreamCall;
  embed(model: string, params: EmbedParams): UpstreamCall;
  /** The events of a streamed answer to {@link chat} or {@link generate}; throws when it breaks off. */
  events(lines: AsyncIterable<string>, started: bigint): AsyncIterable<GenerationEvent>;
  embedResult(json: unknown): EmbedResult;
  /** Where the upstream lists its models (health check and discovery), and the names it lists. */
  readonly listPath: string;
  listed(json: unknown): string[];
}

/** The lines of a streamed body (SSE or NDJSON), without their line ends; empty lines are skipped. */
export async function* lines(body: AsyncIterable<Buffer | string>): AsyncIterable<string> {
  let rest = '';
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    rest += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).replace(/\r$/, '');
      rest = rest.slice(nl + 1);
      if (line !== '') yield line;
    }
  }
  rest += decoder.decode();
  if (rest.trim() !== '') yield rest;
}

/** Nanoseconds since `t` (a `process.hrtime.bigint()`). */
export function nsSince(t: bigint): number {
  return Number(process.hrtime.bigint() - t);
}
