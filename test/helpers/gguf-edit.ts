/**
 * Writes a copy of a GGUF file with one string entry added to its metadata (for example a
 * `tokenizer.chat_template` the fixture lacks), keeping the tensors byte for byte: the entry goes
 * at the end of the key-value section, and the tensor data moves to the next aligned offset.
 *
 * @module
 */
import { readFile, writeFile } from 'node:fs/promises';

const SIZES: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;

export async function withStringMetadata(source: string, target: string, key: string, value: string): Promise<void> {
  const buf = await readFile(source);
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${source} is not a GGUF file`);
  let pos = 8;
  const u32 = (): number => {
    pos += 4;
    return buf.readUInt32LE(pos - 4);
  };
  const u64 = (): number => {
    pos += 8;
    return Number(buf.readBigUInt64LE(pos - 8));
  };
  const str = (): string => {
    const n = u64();
    pos += n;
    return buf.toString('utf8', pos - n, pos);
  };
  const skipValue = (type: number): void => {
    if (type === STRING) {
      const n = u64();
      pos += n;
    } else if (type === ARRAY) {
      const itemType = u32();
      const count = u64();
      for (let i = 0; i < count; i++) skipValue(itemType);
    } else if (SIZES[type] !== undefined) pos += SIZES[type];
    else throw new Error(`unknown GGUF value type ${type}`);
  };
  const tensors = u64();
  const kvCountAt = pos;
  const kvs = u64();
  let alignment = 32;
  for (let i = 0; i < kvs; i++) {
    const name = str();
    const type = u32();
    if (name === key) throw new Error(`${source} already has ${key}`);
    if (name === 'general.alignment' && type === 4) alignment = buf.readUInt32LE(pos);
    skipValue(type);
  }
  const kvEnd = pos;
  for (let i = 0; i < tensors; i++) {
    str();
    const dims = u32();
    pos += dims * 8 + 4 + 8;
  }
  const infoEnd = pos;
  const align = (n: number): number => Math.ceil(n / alignment) * alignment;

  const entry = Buffer.alloc(8 + Buffer.byteLength(key) + 4 + 8 + Buffer.byteLength(value));
  let w = entry.writeBigUInt64LE(BigInt(Buffer.byteLength(key)), 0);
  w += entry.write(key, w);
  w = entry.writeUInt32LE(STRING, w);
  w = entry.writeBigUInt64LE(BigInt(Buffer.byteLength(value)), w);
  entry.write(value, w);

  const head = Buffer.from(buf.subarray(0, kvEnd));
  head.writeBigUInt64LE(BigInt(kvs + 1), kvCountAt);
  const infos = buf.subarray(kvEnd, infoEnd);
  const newInfoEnd = kvEnd + entry.length + infos.length;
  const padding = Buffer.alloc(align(newInfoEnd) - newInfoEnd);
  await writeFile(target, Buffer.concat([head, entry, infos, padding, buf.subarray(align(infoEnd))]));
}
