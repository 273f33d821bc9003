/**
 * A bounded reader of GGUF (v2 and v3) headers. A model file comes from users and registries, so
 * its header is untrusted: it may declare arrays of billions of elements, strings of terabytes or
 * 2^60 metadata entries. This reader keeps what it reads small whatever the file says:
 *
 * - the file is read asynchronously in chunks of {@link CHUNK} bytes, so the event loop is never
 *   held for long;
 * - arrays longer than the caller's limit are skipped (fixed-size elements by seeking past them,
 *   strings by walking their lengths), and stand as `[]` in the metadata;
 * - string values over {@link MAX_STRING} bytes are skipped (the key is left out);
 * - a file is refused (a {@link GgufHeaderError}) when it declares more than {@link MAX_KV}
 *   entries or {@link MAX_TENSORS} tensors, a key over {@link MAX_KEY} bytes, a size past its
 *   end, or when its header needs more than {@link MAX_HEADER_READ} bytes read.
 *
 * Tensor infos are not kept: only the element count per GGML type, which is all the summary needs.
 *
 * @module
 */
import { open, type FileHandle } from 'node:fs/promises';

/** Bytes read from the file at a time (64 KiB). */
const CHUNK = 64 * 1024;
/** Most metadata entries a header may declare (real models have under a hundred). */
export const MAX_KV = 65_536;
/** Most tensors a header may declare (the largest models have a few thousand). */
export const MAX_TENSORS = 1_048_576;
/** Longest key or tensor name, in bytes (the GGUF format caps keys at 65,535). */
export const MAX_KEY = 65_535;
/** Longest string value kept, in bytes (1 MiB; chat templates are a few KiB); longer ones are skipped. */
export const MAX_STRING = 1024 * 1024;
/** Most bytes read to get through a header (64 MiB; a 256k-token vocabulary takes a few MiB). */
export const MAX_HEADER_READ = 64 * 1024 * 1024;
/**
 * Most memory the kept array contents may take in one read, counted as a JavaScript engine holds
 * them (8 bytes a number, 16 plus the text a string): 48 MiB, enough for the full vocabulary of a
 * 256k-token model in the verbose view; arrays past it are skipped.
 */
const MAX_KEPT_ARRAYS = 48 * 1024 * 1024;
/** Deepest nesting of arrays of arrays. */
const MAX_ARRAY_DEPTH = 3;
/** Most dimensions of a tensor (GGML has 4). */
const MAX_DIMS = 8;

/** A header that cannot be read safely or is not GGUF; the message says why. */
export class GgufHeaderError extends Error {}

/** What {@link readGgufHeader} returns. */
export interface GgufHeader {
  version: number;
  tensorCount: number;
  /** Every entry kept, in file order; 64-bit integers become numbers, skipped arrays `[]`. */
  metadata: Map<string, unknown>;
  /** The element count of every array entry, kept or skipped (a vocabulary's size without its tokens). */
  arrayLengths: Map<string, number>;
  /** Elements per GGML tensor type, summed over the tensor infos. */
  elementsByType: Map<number, number>;
  /** Whether a classification head is among the tensors (`cls.weight` or `cls.output.weight`: a reranker's). */
  classifierHead: boolean;
  /** Bytes of the tensor data by where llama.cpp places it; see {@link TensorBytes}. */
  tensorBytes: TensorBytes;
}

/**
 * The tensor data's bytes in the groups a GPU offload moves, measured from the tensors' offsets
 * (each tensor runs to the next one's start, the last to the end of the file), so no table of
 * quantisation block sizes is needed and padding is counted where it lies.
 */
export interface TensorBytes {
  /** The repeating layers (`blk.N.*`). */
  layers: number;
  /** The output layer (`output.weight`, `output_norm.*`), offloaded as one more layer; a model with tied embeddings has no `output.weight` and offloads a copy of `token_embd`, counted here. */
  output: number;
  /** Everything else (the token embeddings, which stay on the CPU, a projector's tensors...). */
  other: number;
}

/** Options of {@link readGgufHeader}. */
export interface GgufHeaderOptions {
  /** Arrays with more elements than this are skipped and stand as `[]`. Defaults to 5. */
  maxArrayLength?: number;
  /** Keys left out entirely (their values are skipped, not read). */
  ignoreKeys?: readonly string[];
}

/** GGUF value type tags, as the file stores them (uint32). */
const T = {
  U8: 0,
  I8: 1,
  U16: 2,
  I16: 3,
  U32: 4,
  I32: 5,
  F32: 6,
  Bool: 7,
  Str: 8,
  Arr: 9,
  U64: 10,
  I64: 11,
  F64: 12,
} as const;
const FIXED_SIZE: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** Skipped values: a string over the limit, or an array that was not kept. */
const SKIPPED = Symbol('skipped');

/** A forward-only buffered reader over a file handle, counting what it reads. */
class Cursor {
  #buf = Buffer.alloc(0);
  #bufStart = 0;
  /** Absolute position of the next byte. */
  pos = 0;
  #read = 0;

  constructor(
    readonly fh: FileHandle,
    readonly size: number,
  ) {}

  /** Makes `n` bytes at `pos` available in the buffer (n ≤ CHUNK, or one larger read for a long string). */
  async #fill(n: number): Promise<void> {
    if (this.pos + n > this.size) throw new GgufHeaderError('the file ends inside its header (truncated)');
    const offset = this.pos - this.#bufStart;
    if (offset >= 0 && offset + n <= this.#buf.length) return;
    const want = Math.min(Math.max(n, CHUNK), this.size - this.pos);
    this.#read += want;
    if (this.#read > MAX_HEADER_READ) throw new GgufHeaderError(`the header is larger than ${MAX_HEADER_READ} bytes`);
    const buf = Buffer.allocUnsafe(want);
    const { bytesRead } = await this.fh.read(buf, 0, want, this.pos);
    if (bytesRead < n) throw new GgufHeaderError('the file ends inside its header (truncated)');
    this.#buf = buf.subarray(0, bytesRead);
    this.#bufStart = this.pos;
  }

  async bytes(n: number): Promise<Buffer> {
    await this.#fill(n);
    const offset = this.pos - this.#bufStart;
    this.pos += n;
    return this.#buf.subarray(offset, offset + n);
  }

  /** Moves past `n` bytes without reading them. */
  skip(n: number): void {
    if (!Number.isSafeInteger(n) || this.pos + n > this.size) throw new GgufHeaderError('a value reaches past the end of the file');
    this.pos += n;
  }

  async u32(): Promise<number> {
    return (await this.bytes(4)).readUInt32LE(0);
  }

  /** A uint64 count or length; refused when it is not a safe integer. */
  async u64(): Promise<number> {
    const v = (await this.bytes(8)).readBigUInt64LE(0);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufHeaderError(`a count or length of ${v} is not plausible`);
    return Number(v);
  }

  async scalar(type: number): Promise<unknown> {
    const size = FIXED_SIZE[type];
    if (size === undefined) throw new GgufHeaderError(`unknown value type ${type}`);
    const b = await this.bytes(size);
    switch (type) {
      case T.U8:
        return b.readUInt8(0);
      case T.I8:
        return b.readInt8(0);
      case T.U16:
        return b.readUInt16LE(0);
      case T.I16:
        return b.readInt16LE(0);
      case T.U32:
        return b.readUInt32LE(0);
      case T.I32:
        return b.readInt32LE(0);
      case T.F32:
        return b.readFloatLE(0);
      case T.Bool:
        return b.readUInt8(0) !== 0;
      case T.U64:
        return Number(b.readBigUInt64LE(0));
      case T.I64:
        return Number(b.readBigInt64LE(0));
      default:
        return b.readDoubleLE(0);
    }
  }

  /**
   * Moves past `count` strings (each a uint64 length, then its bytes) without an await per string
   * while their lengths are in the buffer: a vocabulary of 150k tokens is walked in a few ms
   * instead of a few hundred.
   */
  async skipStrings(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      let offset = this.pos - this.#bufStart;
      if (offset < 0 || offset + 8 > this.#buf.length) {
        await this.#fill(8);
        offset = 0;
      }
      const len = this.#buf.readBigUInt64LE(offset);
      if (len > BigInt(Number.MAX_SAFE_INTEGER)) throw new GgufHeaderError(`a count or length of ${len} is not plausible`);
      this.pos += 8;
      this.skip(Number(len));
    }
  }

  /** A string of at most `max` bytes, or {@link SKIPPED} (moved past) when longer. */
  async string(max: number): Promise<string | typeof SKIPPED> {
    const len = await this.u64();
    if (len > max) {
      this.skip(len);
      return SKIPPED;
    }
    return (await this.bytes(len)).toString('utf8');
  }
}

/** Reads and returns the header of the GGUF file at `file`, within the limits of this module. */
export async function readGgufHeader(file: string, options: GgufHeaderOptions = {}): Promise<GgufHeader> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    return await parse(new Cursor(fh, size), options);
  } finally {
    await fh.close();
  }
}

async function parse(c: Cursor, options: GgufHeaderOptions): Promise<GgufHeader> {
  const maxArray = options.maxArrayLength ?? 5;
  const ignore = new Set(options.ignoreKeys ?? []);
  if (c.size < 24 || (await c.bytes(4)).toString('latin1') !== 'GGUF') throw new GgufHeaderError('the file does not start with the GGUF magic');
  const version = await c.u32();
  if (version !== 2 && version !== 3) throw new GgufHeaderError(`GGUF version ${version} is not supported (2 and 3 are)`);
  const tensorCount = await c.u64();
  const kvCount = await c.u64();
  if (kvCount > MAX_KV) throw new GgufHeaderError(`the header declares ${kvCount} metadata entries (at most ${MAX_KV} are accepted)`);
  if (tensorCount > MAX_TENSORS) throw new GgufHeaderError(`the header declares ${tensorCount} tensors (at most ${MAX_TENSORS} are accepted)`);
  let kept = 0;
  /** The element count of the array read last at the top level. */
  let topLength = 0;

  /** Reads (or skips) one array; `keep` false walks past it. */
  const array = async (keep: boolean, depth: number): Promise<unknown[] | typeof SKIPPED> => {
    const type = await c.u32();
    const length = await c.u64();
    if (depth === 1) topLength = length;
    if (depth > MAX_ARRAY_DEPTH) throw new GgufHeaderError('arrays are nested too deeply');
    const fixed = FIXED_SIZE[type];
    const take = keep && length <= maxArray;
    if (fixed !== undefined) {
      if (!take || kept + length * 8 > MAX_KEPT_ARRAYS) {
        c.skip(length * fixed);
        return SKIPPED;
      }
      kept += length * 8;
      const out = new Array<unknown>(length);
      for (let i = 0; i < length; i++) out[i] = await c.scalar(type);
      return out;
    }
    if (type !== T.Str && type !== T.Arr) throw new GgufHeaderError(`unknown array element type ${type}`);
    // Every element takes at least 8 bytes (a length, or a type and a length): a cheap plausibility check.
    if (length * 8 > c.size - c.pos) throw new GgufHeaderError('an array declares more elements than the file can hold');
    let out: unknown[] | null = take ? [] : null;
    for (let i = 0; i < length; i++) {
      if (out === null && type === T.Str) {
        await c.skipStrings(length - i);
        break;
      }
      const v = type === T.Str ? await c.string(MAX_STRING) : await array(out !== null, depth + 1);
      if (v === SKIPPED) out = null;
      else if (out) {
        kept += type === T.Str ? (v as string).length + 16 : 16;
        if (kept > MAX_KEPT_ARRAYS) out = null;
        else out.push(v);
      }
    }
    return out ?? SKIPPED;
  };

  const metadata = new Map<string, unknown>();
  const arrayLengths = new Map<string, number>();
  for (let i = 0; i < kvCount; i++) {
    const key = await c.string(MAX_KEY);
    if (key === SKIPPED) throw new GgufHeaderError(`a metadata key is longer than ${MAX_KEY} bytes`);
    const type = await c.u32();
    const wanted = !ignore.has(key);
    let value: unknown;
    if (type === T.Str) value = await c.string(wanted ? MAX_STRING : -1);
    else if (type === T.Arr) {
      value = await array(wanted, 1);
      arrayLengths.set(key, topLength);
      if (value === SKIPPED && wanted) value = [];
    } else value = await c.scalar(type);
    if (wanted && value !== SKIPPED) metadata.set(key, value);
  }

  const elementsByType = new Map<number, number>();
  let classifierHead = false;
  const tensors: { name: string; offset: number }[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = await c.string(MAX_KEY);
    if (name === SKIPPED) throw new GgufHeaderError(`a tensor name is longer than ${MAX_KEY} bytes`);
    if (name === 'cls.weight' || name === 'cls.output.weight') classifierHead = true;
    const dims = await c.u32();
    if (dims > MAX_DIMS) throw new GgufHeaderError(`a tensor declares ${dims} dimensions`);
    let elements = 1;
    for (let d = 0; d < dims; d++) elements *= await c.u64();
    const ggmlType = await c.u32();
    tensors.push({ name, offset: await c.u64() });
    elementsByType.set(ggmlType, (elementsByType.get(ggmlType) ?? 0) + elements);
  }
  const alignment = metadata.get('general.alignment');
  const align = typeof alignment === 'number' && alignment > 0 ? alignment : 32;
  const dataStart = Math.ceil(c.pos / align) * align;
  return { version, tensorCount, metadata, arrayLengths, elementsByType, classifierHead, tensorBytes: groupTensorBytes(tensors, c.size - dataStart) };
}

function groupTensorBytes(tensors: { name: string; offset: number }[], dataBytes: number): TensorBytes {
  const sorted = [...tensors].sort((a, b) => a.offset - b.offset);
  const groups: TensorBytes = { layers: 0, output: 0, other: 0 };
  let embeddings = 0;
  let tied = true;
  sorted.forEach((t, i) => {
    const bytes = Math.min(dataBytes, Math.max(0, (i + 1 < sorted.length ? sorted[i + 1]!.offset : dataBytes) - t.offset));
    if (t.name.startsWith('blk.')) groups.layers += bytes;
    else if (t.name === 'output.weight' || t.name.startsWith('output_norm.')) {
      groups.output += bytes;
      if (t.name === 'output.weight') tied = false;
    } else {
      groups.other += bytes;
      if (t.name === 'token_embd.weight') embeddings = bytes;
    }
  });
  if (tied) groups.output += embeddings;
  return groups;
}
