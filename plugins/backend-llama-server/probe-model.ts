/**
 * The probe model: a GGUF of a one-layer llama with 64-wide embeddings, small enough to write in
 * a few milliseconds (about 80 KB) and shaped so that llama.cpp's CPU backend runs the kernels a
 * real model runs. Its matrices are Q4_0 (attention query and output, the vocabulary head), Q8_0
 * (attention key, the feed-forward gate and up) and F16 (attention value, feed-forward down), and
 * every one has a width and a height that are multiples of 32, so a CPU variant with AMX takes
 * them into its tile kernels; the vocabulary is SentencePiece's (all 256 byte tokens, BOS and
 * EOS), so the server's warm-up decodes two tokens, a batch, as a prompt does.
 *
 * The weights are a fixed pseudo-random pattern: the probe asks whether the engine computes at
 * all on this CPU, never what it answers. Written by {@link writeProbeModel}; the GGUF layout
 * (version 3: header, key-value pairs, tensor descriptions, 32-byte aligned data) is ggml's.
 *
 * @module
 */
import { writeFile } from 'node:fs/promises';

const EMBED = 64;
const FFN = 128;
const HEADS = 2;
/** Special tokens, the 256 byte tokens, and letters with and without a word start: 288 = 9 × 32. */
const TOKENS = ['<unk>', '<s>', '</s>', ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`)]
  .concat(['\u2581', ...'abcdefghijklmnopqrstuvwxyz'])
  .concat(['\u2581a', '\u2581t']);

/** ggml's tensor types used here, with the bytes of one block and the values it holds. */
const TYPES = {
  f32: { id: 0, block: 1, bytes: 4 },
  f16: { id: 1, block: 1, bytes: 2 },
  q4_0: { id: 2, block: 32, bytes: 18 },
  q8_0: { id: 8, block: 32, bytes: 34 },
};
type TensorType = keyof typeof TYPES;

/** GGUF value types. */
const U32 = 4;
const I32 = 5;
const F32 = 6;
const STRING = 8;
const ARRAY = 9;

type Value = { u32: number } | { f32: number } | { str: string } | { strs: string[] } | { f32s: number[] } | { i32s: number[] };

/** A growing little-endian byte buffer. */
class Bytes {
  #chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.#chunks.push(b);
    this.length += b.length;
  }
  u32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(n);
    this.push(b);
  }
  i32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(n);
    this.push(b);
  }
  u64(n: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(n));
    this.push(b);
  }
  f32(n: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(n);
    this.push(b);
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  pad(to: number): void {
    const rest = (to - (this.length % to)) % to;
    if (rest) this.push(Buffer.alloc(rest));
  }
  value(v: Value): void {
    if ('u32' in v) return (this.u32(U32), this.u32(v.u32));
    if ('f32' in v) return (this.u32(F32), this.f32(v.f32));
    if ('str' in v) return (this.u32(STRING), this.str(v.str));
    const [type, items, put] =
      'strs' in v
        ? [STRING, v.strs, (s: string) => this.str(s)]
        : 'f32s' in v
          ? [F32, v.f32s, (n: number) => this.f32(n)]
          : [I32, v.i32s, (n: number) => this.i32(n)];
    this.u32(ARRAY);
    this.u32(type);
    this.u64(items.length);
    for (const item of items as Array<string & number>) put(item);
  }
  concat(): Buffer {
    return Buffer.concat(this.#chunks, this.length);
  }
}

/** A deterministic byte pattern (xorshift32), so two probe files are identical. */
function pattern(length: number, seed: number): Buffer {
  const out = Buffer.alloc(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** The data of a tensor of `count` values of `type`: small scales, pseudo-random quants. */
function tensorData(type: TensorType, count: number, seed: number): Buffer {
  const t = TYPES[type];
  const blocks = count / t.block;
  if (type === 'f32') {
    const b = Buffer.alloc(count * 4);
    for (let i = 0; i < count; i++) b.writeFloatLE(1, i * 4); // norms: weight 1
    return b;
  }
  const data = pattern(blocks * t.bytes, seed);
  if (type === 'f16') {
    // Halves of magnitude below 1/16 (exponent 0..10): no infinity, no NaN.
    for (let i = 1; i < data.length; i += 2) data[i] = (data[i]! & 0x80) | (data[i]! & 0x29);
    return data;
  }
  // Each block starts with its scale as a half: 2^-7.
  for (let b = 0; b < blocks; b++) data.writeUInt16LE(0x2000, b * t.bytes);
  return data;
}

/** The GGUF bytes of the probe model. */
export function probeModel(): Buffer {
  const kv: Array<[string, Value]> = [
    ['general.architecture', { str: 'llama' }],
    ['general.name', { str: 'lia-probe' }],
    ['general.alignment', { u32: 32 }],
    ['llama.context_length', { u32: 256 }],
    ['llama.embedding_length', { u32: EMBED }],
    ['llama.block_count', { u32: 1 }],
    ['llama.feed_forward_length', { u32: FFN }],
    ['llama.attention.head_count', { u32: HEADS }],
    ['llama.attention.head_count_kv', { u32: HEADS }],
    ['llama.rope.dimension_count', { u32: EMBED / HEADS }],
    ['llama.attention.layer_norm_rms_epsilon', { f32: 1e-5 }],
    ['llama.vocab_size', { u32: TOKENS.length }],
    ['tokenizer.ggml.model', { str: 'llama' }],
    ['tokenizer.ggml.tokens', { strs: TOKENS }],
    ['tokenizer.ggml.scores', { f32s: TOKENS.map((_, i) => (i < 259 ? 0 : -i)) }],
    // 2 unknown, 3 control, 6 byte, 1 normal.
    ['tokenizer.ggml.token_type', { i32s: TOKENS.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1)) }],
    ['tokenizer.ggml.unknown_token_id', { u32: 0 }],
    ['tokenizer.ggml.bos_token_id', { u32: 1 }],
    ['tokenizer.ggml.eos_token_id', { u32: 2 }],
  ];
  const vocab = TOKENS.length;
  const tensors: Array<[string, number[], TensorType]> = [
    ['token_embd.weight', [EMBED, vocab], 'q4_0'],
    ['output_norm.weight', [EMBED], 'f32'],
    ['output.weight', [EMBED, vocab], 'q4_0'],
    ['blk.0.attn_norm.weight', [EMBED], 'f32'],
    ['blk.0.attn_q.weight', [EMBED, EMBED], 'q4_0'],
    ['blk.0.attn_k.weight', [EMBED, EMBED], 'q8_0'],
    ['blk.0.attn_v.weight', [EMBED, EMBED], 'f16'],
    ['blk.0.attn_output.weight', [EMBED, EMBED], 'q4_0'],
    ['blk.0.ffn_norm.weight', [EMBED], 'f32'],
    ['blk.0.ffn_gate.weight', [EMBED, FFN], 'q8_0'],
    ['blk.0.ffn_up.weight', [EMBED, FFN], 'q8_0'],
    ['blk.0.ffn_down.weight', [FFN, EMBED], 'f16'],
  ];
  const out = new Bytes();
  out.push(Buffer.from('GGUF', 'latin1'));
  out.u32(3);
  out.u64(tensors.length);
  out.u64(kv.length);
  for (const [key, value] of kv) {
    out.str(key);
    out.value(value);
  }
  const data = new Bytes();
  tensors.forEach(([name, dims, type], i) => {
    const count = dims.reduce((a, b) => a * b, 1);
    out.str(name);
    out.u32(dims.length);
    for (const d of dims) out.u64(d);
    out.u32(TYPES[type].id);
    data.pad(32);
    out.u64(data.length);
    data.push(tensorData(type, count, 0x9e3779b9 + i));
  });
  out.pad(32);
  data.pad(32);
  out.push(data.concat());
  return out.concat();
}

/** Writes the probe model to `file`. */
export async function writeProbeModel(file: string): Promise<void> {
  await writeFile(file, probeModel(), { mode: 0o600 });
}
