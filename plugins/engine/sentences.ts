/**
 * The input of a speech request cut into the parts a model speaks one at a time: sentences, so
 * the answer can start as soon as the first is spoken, and a long sentence cut again at a comma
 * or a space so no part outgrows what a model speaks well in one pass. Where a cut falls only
 * changes where the voice pauses; every word of the input is in exactly one part, in order.
 *
 * @module
 */

/** The longest part, in characters (about 20 s of speech). */
export const MAX_PART_CHARS = 300;

/** Sentence ends: `.`, `!`, `?`, `…` (and runs of them) with closing quotes or brackets, then a space; or CJK full stops. */
const SENTENCE_END = /[.!?…]+["'”’»)\]]*(?=\s)|[。！？]+["'”’」』)\]]*/gu;

/** The parts of `text`, trimmed, none empty; lines are parts of their own. */
export function splitSentences(text: string, maxChars = MAX_PART_CHARS): string[] {
  const parts: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    let start = 0;
    for (const m of line.matchAll(SENTENCE_END)) {
      const end = m.index + m[0].length;
      pushPart(parts, line.slice(start, end), maxChars);
      start = end;
    }
    pushPart(parts, line.slice(start), maxChars);
  }
  return parts;
}

/** Adds `sentence` (trimmed, its spaces collapsed) as one part, or as several when it is longer than `maxChars`. */
function pushPart(parts: string[], sentence: string, maxChars: number): void {
  let rest = sentence.replace(/\s+/g, ' ').trim();
  while (rest.length > maxChars) {
    const head = rest.slice(0, maxChars + 1);
    // The last comma-like mark, else the last space, in the second half; else a hard cut.
    const comma = Math.max(...[',', ';', ':', '，', '、', '；'].map((c) => head.lastIndexOf(c)));
    const space = head.lastIndexOf(' ');
    const cut = comma >= maxChars / 2 ? comma + 1 : space >= maxChars / 2 ? space : maxChars;
    parts.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) parts.push(rest);
}
