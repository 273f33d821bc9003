import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Batcher, BlobFile } from '../../plugins/model-store/registry/blob-file.js';

const tmpFile = async (t: { teardown(fn: () => unknown): void }, size: number): Promise<string> => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-blobfile-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'blob-partial');
  await writeFile(file, Buffer.alloc(size));
  return file;
};

t.test('a batch gathers chunks as they are until it reaches its size', async (t) => {
  const b = new Batcher(100);
  const first = Buffer.allocUnsafeSlow(60);
  const second = Buffer.allocUnsafeSlow(200).subarray(10, 70);
  t.equal(b.push(first), null, 'not full yet');
  const batch = b.push(second)!;
  t.same(batch, [first, second]);
  t.equal(batch[1], second, 'no copy');
  t.equal(b.take(), null, 'nothing left after a full batch');
  t.equal(b.push(Buffer.alloc(0)), null, 'empty chunks are ignored');
  b.push(first);
  t.same(b.take(), [first], 'take() hands over a partial batch');
});

t.test('the caller may reuse its buffers as soon as write returns', async (t) => {
  const data = randomBytes(300);
  const read = Buffer.from(data); // e.g. a socket read buffer that the next read overwrites
  const file = await tmpFile(t, 300);
  const f = await BlobFile.open(file);
  f.write([read.subarray(0, 120), read.subarray(120)], 0, true);
  read.fill(0);
  await f.drain();
  t.equal(await f.finish(), createHash('sha256').update(data).digest('hex'));
  await f.close();
  t.same(await readFile(file), data, 'the file holds the bytes as they were when written');
});

t.test('40 MiB in odd-sized batches wrap around the shared ring many times, byte for byte', async (t) => {
  const data = randomBytes(40 * 1024 * 1024 + 5);
  const file = await tmpFile(t, data.length);
  const f = await BlobFile.open(file);
  let pos = 0;
  let waits = 0;
  let written = 0;
  for (let i = 0; pos < data.length; i++) {
    const size = Math.min(data.length - pos, 700_001 + (i % 7) * 333_333); // up to 2.7 MB
    const chunk = data.subarray(pos, pos + size);
    if (!f.write([chunk.subarray(0, 1000), chunk.subarray(1000)], pos, true, (n) => (written += n))) {
      waits++;
      await f.room();
    }
    pos += size;
  }
  await f.drain();
  t.equal(written, data.length, 'every byte reported written');
  t.equal(await f.finish(), createHash('sha256').update(data).digest('hex'), 'the hash saw the bytes in order');
  await f.close();
  t.same(await readFile(file), data, 'the file holds the data');
  t.comment(`${waits} waits for room`);
});

t.test('reads filled in place wrap around the ring many times, byte for byte, mixed with copies', async (t) => {
  const data = randomBytes(40 * 1024 * 1024 + 11);
  const file = await tmpFile(t, data.length);
  const f = await BlobFile.open(file);
  // Copies go through write(); a fill of the region must not.
  let copies = 0;
  const write = f.write.bind(f);
  f.write = (...args: Parameters<BlobFile['write']>) => (copies++, write(...args));
  let pos = 0;
  let written = 0;
  let inPlace = 0;
  let foreign = 0;
  let waits = 0;
  for (let i = 0; pos < data.length; i++) {
    // A socket read: into the region when there is one, else into a buffer of its own.
    const region = i % 11 === 5 ? null : f.region(1 << 20);
    const target = region ?? Buffer.allocUnsafe(300_000);
    const n = Math.min(data.length - pos, target.length, 1 + ((i * 7919) % 1_048_576));
    data.copy(target, 0, pos, pos + n);
    if (region) inPlace++;
    else foreign++;
    const more = f.fill(target, n, pos, true, (b) => (written += b));
    pos += n;
    if (!more) {
      waits++;
      await f.room();
    }
  }
  await f.drain();
  t.equal(written, data.length, 'every byte reported written');
  t.equal(await f.finish(), createHash('sha256').update(data).digest('hex'), 'the hash saw the bytes in order');
  await f.close();
  t.same(await readFile(file), data, 'the file holds the data');
  t.ok(inPlace > 40, `${inPlace} reads landed in place`);
  t.equal(copies, foreign, 'only the reads into other buffers were copied');
  t.comment(`${waits} waits for room`);
});

t.test('the ring hands out no region while it is full, and a stale region is copied, not trusted', async (t) => {
  const file = await tmpFile(t, 32 * 1024 * 1024);
  const f = await BlobFile.open(file);
  // Fill the ring to the brim with in-place reads without waiting for the writer.
  let pos = 0;
  for (let region = f.region(4 << 20); region; region = f.region(4 << 20)) {
    region.fill(7);
    f.fill(region, region.length, pos, false);
    pos += region.length;
  }
  t.ok(pos >= 16 * 1024 * 1024 - (4 << 20), `${pos} bytes in flight when the ring said it was full`);
  await f.drain();
  const region = f.region(1024)!;
  region.fill(9);
  f.write([Buffer.alloc(10, 1)], pos, false); // takes the ring's head, so the region is stale
  const stale = Buffer.from(region); // what the region's memory holds now
  t.equal(f.fill(region, 1024, pos + 10, false), true, 'a stale region is copied like any buffer');
  await f.drain();
  await f.close();
  const bytes = await readFile(file);
  t.equal(bytes[0], 7);
  t.same(bytes.subarray(pos, pos + 10), Buffer.alloc(10, 1), 'the write landed');
  t.same(bytes.subarray(pos + 10, pos + 1034), stale, 'the stale region landed as a copy of its bytes then');
});

t.test('a write that ignores back-pressure is refused, not written over data in flight', async (t) => {
  const file = await tmpFile(t, 20 * 1024 * 1024);
  const f = await BlobFile.open(file);
  const big = Buffer.alloc(6 * 1024 * 1024, 1);
  t.equal(f.write([big], 0, false), true, '6 MiB in flight: room for more');
  t.equal(f.write([big], big.length, false), false, '12 MiB in flight: wait');
  t.throws(() => f.write([big], 2 * big.length, false), RangeError);
  await f.drain();
  await f.close();
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
  t.equal(await f.finish(), createHash('sha256').update(data).digest('hex'));
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
