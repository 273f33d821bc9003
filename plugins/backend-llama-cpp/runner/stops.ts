/**
 * Stop sequences, detected on the text stream as llama-server does. node-llama-cpp's own
 * `customStopTriggers` re-tokenise the text held back before a trigger with "trim leading space",
 * which drops a space from the answer (", there w" + "as" became ", therew"); matching on text
 * keeps every character before the stop sequence and none of it or after it.
 *
 * @module
 */

/** Streams text through, holding back what may be the start of a stop sequence. */
export class StopDetector {
  readonly #stops: readonly string[];
  readonly #emit: (text: string) => void;
  readonly #onStop: () => void;
  #held = '';
  #stopped = false;
  #matched: string | undefined;

  /** `onStop` runs once, when a stop sequence is complete; nothing is emitted after it. */
  constructor(stops: readonly string[], emit: (text: string) => void, onStop: () => void) {
    this.#stops = stops.filter((s) => s.length > 0);
    this.#emit = emit;
    this.#onStop = onStop;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** The stop sequence that ended the stream (the earliest in the text), once {@link stopped}. */
  get matched(): string | undefined {
    return this.#matched;
  }

  push(text: string): void {
    if (this.#stopped || text === '') return;
    if (this.#stops.length === 0) return this.#emit(text);
    const buffer = this.#held + text;
    let at = -1;
    for (const stop of this.#stops) {
      const i = buffer.indexOf(stop);
      if (i >= 0 && (at < 0 || i < at)) {
        at = i;
        this.#matched = stop;
      }
    }
    if (at >= 0) {
      this.#held = '';
      this.#stopped = true;
      if (at > 0) this.#emit(buffer.slice(0, at));
      this.#onStop();
      return;
    }
    let hold = 0;
    for (const stop of this.#stops) {
      for (let k = Math.min(stop.length - 1, buffer.length); k > hold; k--) {
        if (buffer.endsWith(stop.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    this.#held = buffer.slice(buffer.length - hold);
    const out = buffer.slice(0, buffer.length - hold);
    if (out) this.#emit(out);
  }

  /** Emits what was held back (the generation ended without completing a stop sequence). */
  flush(): void {
    if (!this.#stopped && this.#held) this.#emit(this.#held);
    this.#held = '';
  }
}
