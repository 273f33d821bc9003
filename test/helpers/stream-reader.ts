/**
 * Reading a streamed answer as a client does: up to the first chunk that matches, then the rest.
 *
 * @module
 */

/**
 * Reads `body` until its text so far matches `until` (a stream that ends first throws with what
 * came), and returns a function that reads the rest and resolves with the whole text.
 */
export async function readUntil(body: ReadableStream<Uint8Array>, until: RegExp): Promise<() => Promise<string>> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  while (!until.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended early: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  };
}
