/**
 * What a flavour (an upstream's API) does: turn the engine's native parameters into its request,
 * and its streamed answer back into the engine's events. Every upstream request streams, even for
 * a client that asked for one answer: the engine gathers the events, and the first event tells
 * the replica logic that the answer has started (after it, no retry).
 *
 * @module
 */
import type { ChatParams, EmbedParams, EmbedResult, GenerateParams, GenerationEvent } from 'lia/engine';

import { streamLines, type WireCall as UpstreamCall } from 'lia/openai-wire';

export type { UpstreamCall };

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
export const lines = streamLines;
