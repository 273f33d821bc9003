/**
 * Thinking: a model whose template has a thinking section (`.Thinking`, the `thinking`
 * capability) writes its reasoning first, between `<think>` and `</think>`. When a request asks
 * for it (`think`), the engine splits the output stream into `thinking` events (the text between
 * the tags, without the whitespace around it) and `token` events (the answer after the closing
 * tag, without the whitespace that follows it). An output that does not open with `<think>`
 * (whitespace aside) is all answer; one that never closes it is all thinking. Tags split across
 * tokens are held back until they are complete.
 *
 * @module
 */
import type { GeneratedLogprob, GenerationEvent } from './public.js';

const OPEN = '<think>';
const CLOSE = '</think>';

/** Text for each side of the split. */
export interface Split {
  thinking: string;
  content: string;
}

/** The length of the longest end of `text` that starts `tag`. */
function partialTag(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (tag.startsWith(text.slice(-n))) return n;
  return 0;
}

/** Splits streamed text on `<think>…</think>` (see the module comment). */
export class ThinkingSplitter {
  #state: 'start' | 'thinking' | 'after' | 'content' = 'start';
  #held = '';

  /** The text that can be sent for `text` (some may be held back for a tag or trailing space). */
  push(text: string): Split {
    const out: Split = { thinking: '', content: '' };
    let rest = this.#held + text;
    this.#held = '';
    for (;;) {
      if (this.#state === 'start') {
        const trimmed = rest.trimStart();
        if (trimmed.startsWith(OPEN)) {
          this.#state = 'thinking';
          rest = trimmed.slice(OPEN.length).trimStart();
          continue;
        }
        if (OPEN.startsWith(trimmed)) this.#held = rest;
        else {
          this.#state = 'content';
          out.content += rest;
        }
        return out;
      }
      if (this.#state === 'thinking') {
        if (this.#seenThinking === false) rest = rest.trimStart();
        const end = rest.indexOf(CLOSE);
        if (end >= 0) {
          out.thinking += rest.slice(0, end).trimEnd();
          this.#state = 'after';
          rest = rest.slice(end + CLOSE.length);
          continue;
        }
        // Hold back a partial closing tag and trailing whitespace (it may end the thinking).
        const keep = Math.max(partialTag(rest, CLOSE), rest.length - rest.trimEnd().length);
        out.thinking += rest.slice(0, rest.length - keep);
        this.#held = rest.slice(rest.length - keep);
        if (out.thinking.length > 0) this.#seenThinking = true;
        return out;
      }
      if (this.#state === 'after') {
        rest = rest.trimStart();
        if (rest.length > 0) this.#state = 'content';
        out.content += rest;
        return out;
      }
      out.content += rest;
      return out;
    }
  }

  /** Whatever is still held back, at the end of the output. */
  flush(): Split {
    const held = this.#held;
    this.#held = '';
    if (this.#state === 'thinking') return { thinking: held.trimEnd(), content: '' };
    if (this.#state === 'start') return { thinking: '', content: held };
    return { thinking: '', content: '' };
  }

  #seenThinking = false;
}

/**
 * `source` with its text split into `thinking` and `token` events. Logprobs go with the first event
 * that follows their token's text (held-back text keeps them until it is sent).
 */
export async function* splitThinking(source: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
  const splitter = new ThinkingSplitter();
  let logprobs: GeneratedLogprob[] | undefined;
  const events = (s: Split): GenerationEvent[] => {
    const out: GenerationEvent[] = [
      ...(s.thinking ? [{ type: 'thinking' as const, text: s.thinking }] : []),
      ...(s.content ? [{ type: 'token' as const, text: s.content }] : []),
    ];
    const first = out[0];
    if (logprobs && first && (first.type === 'token' || first.type === 'thinking')) {
      first.logprobs = logprobs;
      logprobs = undefined;
    }
    return out;
  };
  for await (const e of source) {
    if (e.type === 'token') {
      if (e.logprobs) logprobs = [...(logprobs ?? []), ...e.logprobs];
      yield* events(splitter.push(e.text));
    } else if (e.type === 'done') {
      yield* events(splitter.flush());
      yield e;
    } else yield e;
  }
}
