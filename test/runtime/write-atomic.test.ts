/**
 * core/fs/write-atomic.ts: atomic replacement with an exact mode, durable or not, and the later
 * flush a pull uses for its blobs and manifest.
 */
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { flushToDisk, writeFileAtomic } from '../../core/utils.js';

async function tmpDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-atomic-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

t.test('writes a new file with mode 0600 by default and leaves no temp file', async (t) => {
  const dir = await tmpDir(t);
  const file = path.join(dir, 'key');
  await writeFileAtomic(file, 'secret\n');
  t.equal(await readFile(file, 'utf8'), 'secret\n');
  t.equal((await stat(file)).mode & 0o777, 0o600);
  t.same(await readdir(dir), ['key']);
});

t.test('replaces an existing file, with the mode asked for whatever the umask', async (t) => {
  const dir = await tmpDir(t);
  const file = path.join(dir, 'manifest');
  await writeFile(file, 'old');
  const umask = process.umask(0o077);
  try {
    await writeFileAtomic(file, Buffer.from('{"new":true}'), { mode: 0o644 });
  } finally {
    process.umask(umask);
  }
  t.equal(await readFile(file, 'utf8'), '{"new":true}');
  t.equal((await stat(file)).mode & 0o777, 0o644);
  t.same(await readdir(dir), ['manifest']);
});

t.test('durable: false writes the same bytes (the caller flushes later)', async (t) => {
  const dir = await tmpDir(t);
  const file = path.join(dir, 'tag');
  await writeFileAtomic(file, 'v1', { durable: false, mode: 0o644 });
  await writeFileAtomic(file, 'v2', { durable: false, mode: 0o644 });
  t.equal(await readFile(file, 'utf8'), 'v2');
  t.same(await readdir(dir), ['tag']);
});

for (const durable of [true, false]) {
  t.test(`a failed rename leaves what was there and no temp file (durable: ${durable})`, async (t) => {
    const dir = await tmpDir(t);
    // A folder (not empty) where the file should go: the rename over it fails.
    const target = path.join(dir, 'sub');
    await mkdir(target);
    await writeFile(path.join(target, 'inside'), 'kept');
    await t.rejects(writeFileAtomic(target, 'z', { durable }), { code: /^(EISDIR|ENOTEMPTY|EEXIST)$/ });
    t.same(await readdir(dir), ['sub'], 'no temp file left');
    t.equal(await readFile(path.join(target, 'inside'), 'utf8'), 'kept');
  });
}

t.test('flushToDisk flushes files and their folders, skips files already gone, reports other failures', async (t) => {
  const dir = await tmpDir(t);
  const a = path.join(dir, 'a');
  const b = path.join(dir, 'b');
  await writeFile(a, 'a');
  await writeFile(b, 'b');
  await t.resolves(flushToDisk([a, b, path.join(dir, 'deleted-meanwhile')]), 'existing files flushed, a missing one skipped');
  t.same([await readFile(a, 'utf8'), await readFile(b, 'utf8')], ['a', 'b'], 'their contents unchanged');
  await t.rejects(flushToDisk([path.join(a, 'not-a-folder')]), { code: 'ENOTDIR' }, 'a path through a file is an error');
});
