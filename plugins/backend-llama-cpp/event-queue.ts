/**
 * A push-to-pull bridge: IPC callbacks push events, an async iterator pulls them. A failure ends
 * the iteration by throwing, after the events already pushed.
 *
 * @module
 */

/** An unbounded single-consumer queue that is also an async iterable. */
export class EventQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #error: unknown = undefined;
  #failed = false;
  #ended = false;
  #wake: (() => void) | null = null;

  push(item: T): void {
    if (this.#failed || this.#ended) return;
    this.#items.push(item);
    this.#notify();
  }

  /** Ends the iteration with `error` once the queued items are consumed. */
  fail(error: unknown): void {
    if (this.#failed || this.#ended) return;
    this.#failed = true;
    this.#error = error;
    this.#notify();
  }

  /** Ends the iteration normally once the queued items are consumed. */
  end(): void {
    this.#ended = true;
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#failed) throw this.#error;
      if (this.#ended) return;
      await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }
}
