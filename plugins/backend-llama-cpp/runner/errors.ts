/**
 * The runner's one error type of its own.
 *
 * @module
 */
import { promptTooLong } from 'lia/gguf';

/** An error caused by the request, not the engine: the parent answers 400 instead of 500. */
export class RequestError extends Error {
  override readonly name = 'RequestError';
}

/**
 * A prompt that leaves no room in the context: a 400 that names the prompt's length, the largest
 * prompt the context takes, and what raises it (see docs/engine.md, "Context length").
 */
export class ContextLengthError extends RequestError {
  /**
   * @param promptTokens the prompt's length as evaluated (BOS included)
   * @param contextLength the context the model is loaded with
   * @param trained the model's trained context (0 when unknown)
   */
  constructor(promptTokens: number, contextLength: number, trained: number) {
    super(promptTooLong(promptTokens, contextLength, trained));
  }
}
