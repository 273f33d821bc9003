/**
 * Pulling from a registry that ignores `Range` (a plain file server or a proxy that strips it):
 * every answer is the whole blob (200). A registry of the test's own (Node's http on loopback)
 * serves a manifest, a config and real GGUF weights, and cuts the connection mid-blob on the first
 * attempts. The pull completes with the right digest, the registry sees one GET per attempt (never
 * one per part, never a growing number), and a registry that cuts every attempt at the same place
 * fails the pull after the configured retries.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { fixture } from '../helpers/fixtures.js';
import { fileDigest } from '../helpers/models.js';
import { call, startStore } from './setup.js';

/** Real weights, small (1.7 MB): the behaviour is what matters, not the size. */
const WEIGHTS = 'gguf/llama-2-tiny-random.gguf';
/** Part size of the pulls here: the weights would come in 7 ranged parts from a registry that honours Range. */
const PART = 256 * 1024;

const sha256 = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

interface Get {
  digest: string;
  range: string | undefined;
  /** What the registry answered. */
  status: number;
}

/** A registry on 127.0.0.1 that serves one model and ignores `Range`, unless told to honour it. */
class PlainRegistry {
  readonly gets: Get[] = [];
  /** Cut this many of the next weights GETs after {@link cutAfter} bytes of the body. */
  cuts = 0;
  cutAfter = 600_000;
  /** Honour `Range` (206) for this many weights GETs, then ignore it (a mixed pool behind a proxy). Defaults to none. */
  rangesHonoured = 0;
  host = '';
  readonly #blobs = new Map<string, Buffer>();
  #manifest = Buffer.alloc(0);
  #server: http.Server | null = null;

  constructor(
    readonly weights: Buffer,
    readonly config: Buffer,
  ) {
    this.#blobs.set(sha256(weights), weights);
    this.#blobs.set(sha256(config), config);
    this.#manifest = Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
        config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: sha256(config), size: config.length },
        layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: sha256(weights), size: weights.length }],
      }),
    );
  }

  get weightsDigest(): string {
    return sha256(this.weights);
  }

  /** The GETs of the weights. */
  weightGets(): Get[] {
    return this.gets.filter((g) => g.digest === this.weightsDigest);
  }

  async start(): Promise<this> {
    const server = http.createServer((req, res) => this.#serve(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    this.#server = server;
    return this;
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = req.url ?? '';
    if (url === '/v2/' || url === '/v2') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    if (/^\/v2\/library\/tiny\/manifests\/latest$/.test(url)) {
      return void res
        .writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json', 'content-length': this.#manifest.length })
        .end(req.method === 'HEAD' ? undefined : this.#manifest);
    }
    const m = /^\/v2\/library\/tiny\/blobs\/(sha256:[0-9a-f]{64})$/.exec(url);
    const blob = m ? this.#blobs.get(m[1]!) : undefined;
    if (!m || !blob) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"BLOB_UNKNOWN","message":"unknown"}]}');
    const digest = m[1]!;
    const range = req.headers.range;
    const isWeights = digest === this.weightsDigest;
    const ranged = /^bytes=(\d+)-(\d+)?$/.exec(range ?? '');
    if (isWeights && ranged && this.rangesHonoured > 0) {
      this.rangesHonoured--;
      const start = Number(ranged[1]);
      const end = Math.min(ranged[2] === undefined ? blob.length - 1 : Number(ranged[2]), blob.length - 1);
      this.gets.push({ digest, range, status: 206 });
      res.writeHead(206, {
        'content-type': 'application/octet-stream',
        'content-length': end - start + 1,
        'content-range': `bytes ${start}-${end}/${blob.length}`,
      });
      return void res.end(blob.subarray(start, end + 1));
    }
    this.gets.push({ digest, range, status: 200 });
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': blob.length });
    if (isWeights && this.cuts > 0) {
      this.cuts--;
      // A dropped connection mid-blob: part of the body, then the socket goes.
      res.write(blob.subarray(0, this.cutAfter), () => setTimeout(() => res.socket?.destroy(), 20));
      return;
    }
    res.end(blob);
  }
}

async function setup(t: Test, storeOptions: Record<string, unknown> = {}) {
  const weights = await readFile(fixture(WEIGHTS));
  const config = Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama', model_type: 'tiny', file_type: 'F32' }));
  const reg = await new PlainRegistry(weights, config).start();
  t.teardown(() => reg.close());
  const app = await startStore({ downloadPartMinBytes: PART, ...storeOptions });
  t.teardown(() => app.close());
  const name = `${reg.host}/library/tiny:latest`;
  const pull = () => call(app, 'POST', '/api/pull', { model: name, insecure: true, stream: false });
  const stored = async () => fileDigest((await app.hooks.extensions.get('models').resolve(name)).modelPath);
  return { reg, app, name, pull, stored, weights };
}

t.test('a registry that ignores Range: one GET per blob', async (t) => {
  const { reg, pull, stored } = await setup(t);
  const res = await pull();
  t.same(res.body, { status: 'success' }, res.text);
  t.equal(await stored(), reg.weightsDigest, 'the blob is intact');
  const gets = reg.weightGets();
  t.equal(gets.length, 1, `one request for the weights, not one per part: ${JSON.stringify(gets)}`);
  t.equal(gets[0]?.range, `bytes=0-${PART - 1}`, 'it asked for the first part, and took the whole blob the registry sent');
});

for (const cuts of [1, 2]) {
  t.test(`cut mid-blob ${cuts} time(s): each retry asks for the rest, takes the whole blob again once, and the pull completes`, async (t) => {
    const { reg, pull, stored } = await setup(t);
    reg.cuts = cuts;
    const res = await pull();
    t.same(res.body, { status: 'success' }, res.text);
    t.equal(await stored(), reg.weightsDigest, 'the right digest (the hash started over with the blob)');
    const gets = reg.weightGets();
    t.equal(gets.length, cuts + 1, `${cuts + 1} full GETs: the first and one per cut (${JSON.stringify(gets)})`);
    t.ok(
      gets.every((g) => g.status === 200),
      'every answer was the whole blob',
    );
    for (const g of gets.slice(1)) t.match(g.range, new RegExp(`^bytes=${reg.cutAfter}-`), 'a retry asked for the rest after the cut, where it stopped');
  });
}

t.test('a registry that cuts every attempt at the same place fails the pull after the retries', async (t) => {
  const retries = 2;
  const { reg, app, pull } = await setup(t, { downloadRetries: retries });
  reg.cuts = 1000;
  const res = await pull();
  t.equal(res.status, 502, res.text);
  t.match(res.body?.error, /download of sha256:[0-9a-f]{64}/, 'the error names the download');
  // The first attempt reaches the cut; each later one starts over and gets no further.
  t.equal(reg.weightGets().length, retries + 2, `bounded: ${retries + 2} GETs (${JSON.stringify(reg.weightGets())})`);
  const tags = await call(app, 'GET', '/api/tags');
  t.same(tags.body.models, [], 'no model');
});

t.test('a registry that honours Range for one part, then ignores it: the parts stop and one stream from the start completes', async (t) => {
  const { reg, pull, stored } = await setup(t);
  reg.rangesHonoured = 1;
  const res = await pull();
  t.same(res.body, { status: 'success' }, res.text);
  t.equal(await stored(), reg.weightsDigest, 'the blob is intact');
  const gets = reg.weightGets();
  t.equal(gets[0]?.status, 206, 'the first part was ranged');
  t.ok(gets.length <= 8, `the other parts went once each at most, then one stream (${gets.length} GETs: ${JSON.stringify(gets)})`);
  const whole = gets.filter((g) => g.range === `bytes=0-${reg.weights.length - 1}`);
  t.equal(whole.length, 1, 'one stream asked for the whole blob from its start');
  t.equal(whole[0]?.status, 200);
});
