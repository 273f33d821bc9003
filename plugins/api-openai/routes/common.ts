/**
 * What the inference routes share: the model-name aliasing, the `param` of a 404 for an unknown
 * model, the response headers, and the opening of a native chat (`startChat`).
 *
 * @module
 */
import type { FastifyReply } from 'fastify';
import { clientGone, Errors, isAppError, type Hooks } from 'lia/plugin';
import type { GenerationEvent, InferenceChatRequest, InferenceService } from 'lia/plugin/contracts';
import { newId, unixSeconds, type ResponseMeta } from '../translate/shared.js';

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

/** An opened native chat: its answer's meta (id, time, model) and and its events. */
export interface OpenedChat {
  meta: ResponseMeta;
  events: AsyncIterable<GenerationEvent>;
  /** Aborts when the client goes away. */
  signal: AbortSignal;
}

/** The engine of each appliance's hooks, once asked for: a sole hook's value never changes once provided. */
const engines = new WeakMap<Hooks, InferenceService>();

/** The inference engine (`hooks.inference`; a 503 while none is provided). */
function engine(hooks: Hooks): InferenceService {
  let found = engines.get(hooks);
  if (!found) engines.set(hooks, (found = hooks.inference.get()));
  return found;
}

/**
 * Opens a native chat for a `/v1` route: resolves the model alias and calls the engine (an unknown
 * model is a 404 naming `model`). The engine's promise settles with the first event in hand
 * (`GenerationStream`), so a failure before any output keeps its status.
 */
export async function startChat(hooks: Hooks, native: InferenceChatRequest, options: RouteOptions, reply: FastifyReply, idPrefix: string): Promise<OpenedChat> {
  const requested = native.model;
  const signal = clientGone(reply);
  const generation = await engine(hooks)
    .chat({ ...native, model: resolveAlias(requested, options) }, signal)
    .catch((err) => withModelParam(err, requested));
  const meta: ResponseMeta = { id: newId(idPrefix), created: unixSeconds(), model: generation.model };
  requestIdHeader(reply, meta.id);
  return { meta, events: generation.events, signal };
}
