/**
 * The runner's one error type of its own.
 *
 * @module
 */

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
    const raise =
      trained > contextLength
        ? `the context length is ${contextLength}; raise it with num_ctx (a request option or the model's PARAMETER) or the engine's contextLength setting (LIA_CONTEXT_LENGTH), up to the model's trained context length of ${trained}`
        : `the context length is ${contextLength}, the model's trained context length; shorten the prompt`;
    super(`prompt is too long: ${promptTokens} tokens > ${contextLength - 1} maximum (${raise})`);
  }
}
