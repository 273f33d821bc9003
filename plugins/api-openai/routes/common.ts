/**
 * What the three inference routes share: the model-name aliasing, the `param` of a 404 for an
 * unknown model, and the response headers (awaiting the first event is core's `primed`).
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { Errors, isAppError } from 'lia/plugin';

/** Options every route reads. */
export interface RouteOptions {
  /** Requested model name → store name (for tools that hard-code OpenAI model names). */
  aliases: Readonly<Record<string, string>>;
}

/** The store name for a requested model (its alias target, or itself). */
export function resolveAlias(model: string, options: RouteOptions): string {
  return Object.hasOwn(options.aliases, model) ? options.aliases[model]! : model;
}

/**
 * Rethrows an engine error so an unknown model reads as OpenAI's 404 (`param: "model"`,
 * `code: "model_not_found"`); anything else passes through unchanged.
 */
export function withModelParam(err: unknown, model: string): never {
  if (isAppError(err) && err.code === 'LIA_ERR_MODEL_NOT_FOUND' && err.param === null) {
    throw Errors.modelNotFound(err.message || `the model '${model}' does not exist`, { param: 'model', cause: err });
  }
  throw err;
}

/** Sets `x-request-id` (the completion id) on the raw response, so SSE replies carry it too. */
export function requestIdHeader(reply: FastifyReply, id: string): void {
  reply.raw.setHeader('x-request-id', id);
}
