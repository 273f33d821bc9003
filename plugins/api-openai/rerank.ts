/**
 * The rerank API as Jina, Cohere, vLLM and llama-server share it: the request body (`model`,
 * `query`, `documents` as strings or objects with `text`, `top_n`, `return_documents`) and pure
 * translations to the engine's {@link InferenceRerankRequest} and back (`results` sorted by
 * `relevance_score`, highest first, cut to `top_n`, and `usage`). `routes/rerank.ts` serves it.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import { Type, type Static } from '@sinclair/typebox';
import { Errors } from 'lia/plugin';
import type { InferenceRerankRequest, RerankResponse } from 'lia/engine';
import { Model, open, Opt } from './translate/schemas.js';

/** A document: its text, or an object with a `text` field (Jina, Cohere v1) or the fields `rank_fields` names. */
const Document = Type.Union([Type.String(), Type.Object({}, open)]);

export const RerankBody = Type.Object(
  {
    model: Model,
    query: Type.String(),
    documents: Type.Array(Document),
    /** How many results to return, best first. Defaults to all. */
    top_n: Opt(Type.Integer({ minimum: 1 })),
    /** Return each result's document. Defaults to true (`/v1/rerank`, `/rerank`) and false (`/v2/rerank`, Cohere v2). */
    return_documents: Opt(Type.Boolean()),
    /** Cohere v1: the fields of object documents to rank on, written as `field: value` lines. */
    rank_fields: Opt(Type.Array(Type.String())),
    /** Cohere's chunking limits: accepted and ignored (a pair longer than the model's context is cut to fit). */
    max_chunks_per_doc: Opt(Type.Integer({ minimum: 1 })),
    max_tokens_per_doc: Opt(Type.Integer({ minimum: 1 })),
    /**
     * LIA's, as Ollama's embed takes it: a query and document pair longer than the model's
     * context is cut to fit (true, the default) or refused with a 400 (false).
     */
    truncate: Opt(Type.Boolean()),
  },
  open,
);
export type RerankBody = Static<typeof RerankBody>;

/** The text the model scores for each document. */
export function documentTexts(body: RerankBody): string[] {
  const fields = body.rank_fields ?? null;
  return body.documents.map((doc, i) => {
    if (typeof doc === 'string') return doc;
    const record = doc as Record<string, unknown>;
    if (fields && fields.length > 0) {
      return fields.map((f) => `${f}: ${typeof record[f] === 'string' ? record[f] : JSON.stringify(record[f] ?? '')}`).join('\n');
    }
    if (typeof record['text'] !== 'string')
      throw Errors.badRequest(`documents[${i}] needs a "text" string (or rank_fields naming its fields)`, { param: `documents[${i}]` });
    return record['text'];
  });
}

/** The engine's request for a body whose model is `model` (the alias resolved). */
export function toRerankRequest(body: RerankBody, model: string): InferenceRerankRequest {
  return { model, query: body.query, documents: documentTexts(body), ...(typeof body.truncate === 'boolean' ? { truncate: body.truncate } : {}) };
}

export interface RerankResult {
  index: number;
  relevance_score: number;
  document?: Record<string, unknown>;
}

/** The answer: results best first (ties in document order), `top_n` of them, with their documents when asked. */
export function rerankAnswer(body: RerankBody, result: RerankResponse, returnDocuments: boolean) {
  const ranked = result.scores.map((score, index) => ({ index, relevance_score: score }));
  ranked.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  const top = body.top_n ? ranked.slice(0, body.top_n) : ranked;
  const results: RerankResult[] = top.map((r) => {
    if (!returnDocuments) return r;
    const doc = body.documents[r.index];
    return { ...r, document: typeof doc === 'string' ? { text: doc } : (doc as Record<string, unknown>) };
  });
  return {
    id: `rerank-${randomUUID()}`,
    model: result.model,
    object: 'list' as const,
    results,
    usage: { prompt_tokens: result.promptTokens, total_tokens: result.promptTokens },
  };
}
