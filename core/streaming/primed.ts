/**
 * Awaiting the first item of a stream before anything is written: a failure before any output
 * (a runner crash, a schema the grammar compiler refuses) is then still an error response with its
 * own status, rather than an error frame in a 200 stream. Both the native and the OpenAI routes
 * use it.
 *
 * @module
 */

/**
 * Awaits the first item; returns the same items, first one included (closing the source when
 * done). The first item is asked for synchronously, before this returns its promise, so the
 * source (an engine request) has started by the caller's next statement: routes set up what does
 * not depend on the first item in between.
 */
export async function primed<T>(items: AsyncIterable<T>): Promise<AsyncIterable<T>> {
  const it = items[Symbol.asyncIterator]();
  let first: IteratorResult<T>;
  try {
    first = await it.next();
  } catch (err) {
    await it.return?.();
    throw err;
  }
  return (async function* () {
    try {
      for (let r = first; !r.done; r = await it.next()) yield r.value;
    } finally {
      await it.return?.();
    }
  })();
}
