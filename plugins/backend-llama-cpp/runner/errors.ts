/**
 * The runner's one error type of its own.
 *
 * @module
 */

/** An error caused by the request, not the engine: the parent answers 400 instead of 500. */
export class RequestError extends Error {
  override readonly name = 'RequestError';
}
