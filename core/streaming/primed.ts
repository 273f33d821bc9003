/**
 * Awaiting the first item of a stream before anything is written: a failure before any output is
 * then still an error response with its own status, rather than an error frame in a 200 stream.
 *
 * The inference service does this itself (`GenerationStream`: its promise settles with the first
 * event in hand), so no built-in route calls it any more. It stays in `lia/plugin` for plugins
 * written against API 1 and goes at the next major.
 *
 * @module
 */

/**
 * @deprecated The inference service's streams come primed (`GenerationStream`); this goes at the
 * next major of the plugin API.
 *
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
