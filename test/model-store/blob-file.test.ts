import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Batcher, BlobFile } from '../../plugins/model-store/registry/blob-file.js';
import { readBuffer } from '../../plugins/model-store/registry/read-buffers.js';

const tmpFile = async (t: { teardown(fn: () => unknown): void }, size: number): Promise<string> => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-blobfile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'blob-partial');
  await writeFile(file, Buffer.alloc(size));
  return file;
};

t.test('a batch passes socket-sized buffers on as they are and copies slices', async (t) => {
  const b = new Batcher(100);
  const owned = Buffer.allocUnsafeSlow(60);
  const big = Buffer.allocUnsafeSlow(200);
  const slice = big.subarray(10, 70);
  t.equal(b.push(owned), null, 'not full yet');
  const batch = b.push(slice)!;
  t.equal(batch.length, 2);
  t.equal(batch[0], owned, 'a buffer that owns its memory is not copied');
  t.not(batch[1]!.buffer, big.buffer, 'a slice is copied, so transferring it cannot take its neighbours');
  t.same(batch[1], slice);
  t.equal(b.take(), null, 'nothing left after a full batch');
  t.equal(b.push(Buffer.alloc(0)), null, 'empty chunks are ignored');
});

t.test('chunks cut from a read buffer pass as they are, and their memory moves once', async (t) => {
  const data = randomBytes(300);
  const read = readBuffer(1024); // a socket read of 300 bytes into a 1 KiB buffer
  data.copy(read, 0);
  const a = read.subarray(0, 120); // e.g. two chunks of a chunked body in one read
  const b = read.subarray(120, 300);
  const batcher = new Batcher(100);
  const batch = [...(batcher.push(a) ?? []), ...(batcher.push(b) ?? [])];
  t.equal(batch[0], a, 'no copy');
  const file = await tmpFile(t, 300);
  const f = await BlobFile.open(file);
  f.write(batch.concat(batcher.take() ?? []), 0, true);
  await f.drain();
  t.equal(read.buffer.byteLength, 0, 'the memory was moved to the writer, not copied');
  t.equal(await f.digest(), createHash('sha256').update(data).digest('hex'));
  await f.close();
  t.same(await readFile(file), data);
});

t.test('writes land at their positions and the hash covers the hashed writes in order', async (t) => {
  const data = randomBytes(3 * 1024 * 1024 + 17);
  const file = await tmpFile(t, data.length);
  const f = await BlobFile.open(file);
  // The second half first, unhashed; then the first half, hashed; then the rest read back.
  const half = 2 * 1024 * 1024;
  const copy = (from: number, to: number): Buffer[] => {
    const b = Buffer.allocUnsafeSlow(to - from);
    data.copy(b, 0, from, to);
    return [b];
  };
  let written = 0;
  f.write(copy(half, data.length), half, false, (n) => (written += n));
  f.write(copy(0, half), 0, true, (n) => (written += n));
  await f.drain();
  t.equal(written, data.length, 'every byte reported written');
  t.equal(await f.hashFile(half, data.length), data.length - half);
  t.equal(await f.digest(), createHash('sha256').update(data).digest('hex'));
  await f.close();
  t.same(await readFile(file), data, 'the file holds the data');
});

t.test('a file that cannot be opened is a clear error with its code', async (t) => {
  await t.rejects(BlobFile.open(path.join(os.tmpdir(), 'lia-no-such-dir', 'x')), { code: 'ENOENT' });
});

t.test('a full disk fails the next write and drain with ENOSPC', async (t) => {
  const f = await BlobFile.open('/dev/full'); // every write to it fails with ENOSPC
  f.write([Buffer.allocUnsafeSlow(4)], 0, false);
  await t.rejects(f.drain(), { code: 'ENOSPC' });
  t.throws(() => f.write([Buffer.allocUnsafeSlow(4)], 0, false), { code: 'ENOSPC' }, 'later writes throw the same failure');
  await f.close();
});
