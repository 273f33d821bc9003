/**
 * The words of a prompt that does not fit the loaded context, shared by every local engine so a
 * client reads the same 400 whichever runs the model: the prompt's length, the largest prompt the
 * context takes (one token stays free for the answer), and what raises the limit. Anthropic's
 * clients read the leading `prompt is too long: N tokens > M maximum` to trim a conversation.
 *
 * @module
 */

/**
 * The message of a `LIA_ERR_CONTEXT_LENGTH_EXCEEDED` error.
 *
 * @param promptTokens the prompt's length as the engine counted it (BOS included)
 * @param contextLength the context the model is loaded with, per sequence
 * @param trained the model's trained context; 0 when unknown
 */
export function promptTooLong(promptTokens: number, contextLength: number, trained: number): string {
  const raise =
    trained > contextLength
      ? `the context length is ${contextLength}; raise it with num_ctx (a request option or the model's PARAMETER) or the engine's contextLength setting (LIA_CONTEXT_LENGTH), up to the model's trained context length of ${trained}`
      : `the context length is ${contextLength}, the model's trained context length; shorten the prompt`;
  return `prompt is too long: ${promptTokens} tokens > ${contextLength - 1} maximum (${raise})`;
}
