/**
 * Splitting a request's inputs into forward passes and padding each pass into model tensors.
 *
 * A request is tokenised once; when all of it fits the token budget (inputs × longest input) it
 * runs as one forward pass in input order. Otherwise the inputs are taken longest first, so each
 * pass pads to a similar length, and a pass closes when one more input would overflow the budget.
 * The budget bounds the memory a pass needs (attention grows with inputs × length²), which a
 * single 2,048-input request could otherwise blow up.
 *
 * @module
 */

/** One tokenised input: `input_ids`, `attention_mask` and whatever else the tokenizer returns. */
export type Encoding = Readonly<Record<string, readonly number[]>>;

/** A padded pass: row-major int64 tensors by input name, the mask for pooling, the input indices. */
export interface PaddedPass {
  indices: number[];
  /** Tokens per row after padding. */
  width: number;
  tensors: Record<string, { data: BigInt64Array; dims: [number, number] }>;
  /** The attention mask as bytes (1 = real token), `indices.length × width`. */
  mask: Uint8Array;
}

/**
 * Groups input indices into passes of at most `budget` padded tokens. An input longer than the
 * budget gets a pass of its own. The groups cover every index exactly once.
 */
export function planPasses(lengths: readonly number[], budget: number): number[][] {
  if (lengths.length === 0) return [];
  const longest = Math.max(...lengths);
  if (longest * lengths.length <= budget) return [lengths.map((_, i) => i)];
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const passes: number[][] = [];
  let current: number[] = [];
  let width = 0;
  for (const i of order) {
    // Sorted longest first: the pass's padded width is set by its first input.
    if (current.length > 0 && (current.length + 1) * width > budget) {
      passes.push(current);
      current = [];
    }
    if (current.length === 0) width = lengths[i]!;
    current.push(i);
  }
  passes.push(current);
  return passes;
}

/**
 * Pads the encodings at `indices` to the longest of them, as the tokenizer pads a batch:
 * `input_ids` with `padTokenId`, every other input with 0, on the tokenizer's padding side.
 */
export function padPass(encodings: readonly Encoding[], indices: readonly number[], padTokenId: number, side: 'left' | 'right' = 'right'): PaddedPass {
  const rows = indices.map((i) => encodings[i]!);
  const width = Math.max(...rows.map((r) => r['input_ids']!.length));
  const keys = Object.keys(rows[0]!);
  const tensors: PaddedPass['tensors'] = {};
  for (const key of keys) {
    const pad = BigInt(key === 'input_ids' ? padTokenId : 0);
    const data = new BigInt64Array(rows.length * width).fill(pad);
    rows.forEach((row, r) => {
      const values = row[key]!;
      const offset = r * width + (side === 'left' ? width - values.length : 0);
      for (let t = 0; t < values.length; t++) data[offset + t] = BigInt(values[t]!);
    });
    tensors[key] = { data, dims: [rows.length, width] };
  }
  const mask = new Uint8Array(rows.length * width);
  rows.forEach((row, r) => {
    const n = row['input_ids']!.length;
    const am = row['attention_mask'];
    const offset = r * width + (side === 'left' ? width - n : 0);
    for (let t = 0; t < n; t++) mask[offset + t] = am ? (am[t] ? 1 : 0) : 1;
  });
  return { indices: [...indices], width, tensors, mask };
}
