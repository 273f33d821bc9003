/**
 * Hostile GGUF headers: a model file declares what it likes (arrays of 10^8 elements, strings of
 * 2^40 bytes, 2^60 metadata entries, or it simply ends early). Creating a model from such a file
 * answers at once with a 400 or a model, the API process's heap stays small and /health answers
 * meanwhile; a stored model whose header does not parse is listed as broken and shown as a 400.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { call, startStore } from '../model-store/setup.js';

/** GGUF value types used here. */
const U8 = 0;
const U32 = 4;
const STRING = 8;
const ARRAY = 9;

const u32 = (n: number): Buffer => Buffer.from(Uint32Array.of(n).buffer);
const u64 = (n: bigint): Buffer => Buffer.from(BigUint64Array.of(n).buffer);
const str = (s: string): Buffer => Buffer.concat([u64(BigInt(Buffer.byteLength(s))), Buffer.from(s)]);
const head = (kvCount: bigint, tensors = 0n): Buffer => Buffer.concat([Buffer.from('GGUF'), u32(3), u64(tensors), u64(kvCount)]);
const arch = Buffer.concat([str('general.architecture'), u32(STRING), str('llama')]);

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return `sha256:${hash.digest('hex')}`;
}

/** Writes `header` as a blob of the store (sized to `size` bytes, sparse) and returns its digest. */
async function blob(dir: string, header: Buffer, size = header.length): Promise<string> {
  const tmp = path.join(dir, 'incoming');
  const fh = await open(tmp, 'w');
  await fh.write(header, 0, header.length, 0);
  await fh.truncate(size);
  await fh.close();
  const digest = await sha256(tmp);
  const { rename } = await import('node:fs/promises');
  await rename(tmp, path.join(dir, 'blobs', `sha256-${digest.slice(7)}`));
  return digest;
}

t.test('hostile GGUF headers are refused or skipped quickly, with a small heap', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-gguf-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(path.join(dir, 'blobs'), { recursive: true });
  const app = await startStore({ modelsDir: dir });
  t.teardown(app.close);
  // A real model first, so the one-time costs (the GGUF library, route compilers) are paid before measuring.
  await createModel(app, 'stories', 'gguf/stories260K.gguf');

  const hostile: Array<[string, string, number | 'ok']> = [
    // one uint8 array of 10^8 elements in a sparse 100 MB file: skipped, the model is created
    ['huge-array', await blob(dir, Buffer.concat([head(2n), arch, str('x.big'), u32(ARRAY), u32(U8), u64(100_000_000n)]), 100_000_200), 'ok'],
    // a string array of 10^8 elements the file cannot hold
    ['string-array', await blob(dir, Buffer.concat([head(2n), arch, str('x.tokens'), u32(ARRAY), u32(STRING), u64(100_000_000n)]), 4096), 400],
    // a string value of 2^40 bytes
    ['huge-string', await blob(dir, Buffer.concat([head(2n), arch, str('x.s'), u32(STRING), u64(2n ** 40n)]), 4096), 400],
    // 2^60 metadata entries
    ['kv-count', await blob(dir, Buffer.concat([head(2n ** 60n), arch]), 4096), 400],
    // 2^40 tensors
    ['tensor-count', await blob(dir, Buffer.concat([head(1n, 2n ** 40n), arch]), 4096), 400],
    // a file that ends in the middle of its header
    ['truncated', await blob(dir, Buffer.concat([head(3n), arch, str('x.n'), u32(U32)])), 400],
  ];

  const before = process.memoryUsage().heapUsed;
  const health: number[] = [];
  let creating = true;
  const probe = (async () => {
    while (creating) {
      health.push((await app.fetch('/health', { auth: false })).status);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const results = await Promise.all(
    hostile.map(([name, digest]) => call(app, 'POST', '/api/create', { model: name, files: { [`${name}.gguf`]: digest }, stream: false })),
  );
  creating = false;
  await probe;
  const grown = process.memoryUsage().heapUsed - before;

  for (const [i, [name, , want]] of hostile.entries()) {
    const res = results[i]!;
    if (want === 'ok') t.equal(res.status, 200, `${name}: created (${res.text})`);
    else {
      t.equal(res.status, want, `${name}: ${res.text}`);
      t.match(res.body, { error: /not a valid GGUF model/ }, name);
    }
  }
  t.ok(grown < 64 * 1024 * 1024, `heap grew by ${Math.round(grown / 1048576)} MiB`);
  t.ok(health.length > 0 && health.every((s) => s === 200), `/health answered during the creates (${health.join(',')})`);

  const shown = await call(app, 'POST', '/api/show', { model: 'huge-array' });
  t.equal(shown.status, 200);
  t.same(shown.body.model_info['x.big'], [], 'the skipped array stands as []');
  t.equal(shown.body.details.family, 'llama');
  const names = (await call(app, 'GET', '/api/tags')).body.models.map((m: { name: string }) => m.name).sort();
  t.same(names, ['huge-array:latest', 'stories:latest'], 'refused files made no model');
});

t.test('a stored model whose header does not parse is listed as broken, and shown as a 400', async (t) => {
  // As a registry could deliver it: a manifest whose config records no format, over a hostile blob.
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-gguf-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(path.join(dir, 'blobs'), { recursive: true });
  const weights = Buffer.concat([head(2n ** 60n), arch]);
  const digest = await blob(dir, weights);
  const config = Buffer.from('{}');
  const configDigest = `sha256:${createHash('sha256').update(config).digest('hex')}`;
  await writeFile(path.join(dir, 'blobs', `sha256-${configDigest.slice(7)}`), config);
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: configDigest, size: config.length },
    layers: [{ mediaType: 'application/vnd.ollama.image.model', digest, size: weights.length }],
  };
  await mkdir(path.join(dir, 'manifests', 'registry.ollama.ai', 'library', 'evil'), { recursive: true });
  await writeFile(path.join(dir, 'manifests', 'registry.ollama.ai', 'library', 'evil', 'latest'), JSON.stringify(manifest));
  const app = await startStore({ modelsDir: dir });
  t.teardown(app.close);

  for (let i = 0; i < 2; i++) {
    const tags = await call(app, 'GET', '/api/tags');
    t.equal(tags.status, 200, 'listing survives (again and again)');
    t.match(tags.body.models, [{ name: 'evil:latest', details: { format: '', broken: /not a valid GGUF model: a count or length of \d+ is not plausible/ } }]);
  }
  const shown = await call(app, 'POST', '/api/show', { model: 'evil' });
  t.equal(shown.status, 400);
  t.match(shown.body, { error: /not a valid GGUF model/ });
  t.equal((await app.fetch('/health', { auth: false })).status, 200);
});
