/**
 * Where a registry may lead a pull, and how failures read: redirects and token realms to `file:`
 * URLs or (from a public registry) private addresses are refused with a 502; the answer of a
 * server a redirect led to is never quoted; hosts that are no URL host are a 400; a registry that
 * stalls after its headers is a 504; a blob cut mid-way leaves nothing listed and is resumed by
 * the next pull.
 */
import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import { TargetPolicy, isPrivateAddress } from '../../plugins/model-store/registry/targets.js';
import { fixture } from '../helpers/fixtures.js';
import { call, startStore } from '../model-store/setup.js';

const SECRET = 'internal-secret-4711';
const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A plain HTTP server on loopback whose behaviour each test sets. */
async function server(t: Test, handler: Handler): Promise<{ host: string; handle: { fn: Handler } }> {
  const handle = { fn: handler };
  const s = http.createServer((req, res) => handle.fn(req, res));
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    s.closeAllConnections();
    return new Promise<void>((r) => s.close(() => r()));
  });
  return { host: `127.0.0.1:${(s.address() as AddressInfo).port}`, handle };
}

/** A model as a registry serves it: the weights (stories260K, over 1 MiB, so downloaded in ranges to a partial file) and a config. */
const weights = await readFile(fixture('gguf/stories260K.gguf'));
const config = Buffer.from(JSON.stringify({ model_format: 'gguf', model_family: 'llama', model_type: '293K', file_type: 'F32' }));
const manifest = JSON.stringify({
  schemaVersion: 2,
  mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
  config: { mediaType: 'application/vnd.docker.container.image.v1+json', digest: sha(config), size: config.length },
  layers: [{ mediaType: 'application/vnd.ollama.image.model', digest: sha(weights), size: weights.length }],
});

/** Serves the manifest and the config; `blob` answers for the weights. */
function registry(blob: Handler): Handler {
  return (req, res) => {
    if (req.url?.endsWith('/manifests/latest'))
      return void res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json' }).end(manifest);
    if (req.url?.endsWith(`/blobs/${sha(config)}`)) return void res.writeHead(200).end(config);
    if (req.url?.endsWith(`/blobs/${sha(weights)}`)) return blob(req, res);
    res.writeHead(404).end();
  };
}

/** Answers a (ranged) GET of the weights, cutting the connection after `cutAt` bytes if given. */
function serveWeights(cutAt?: number): Handler {
  return (req, res) => {
    const m = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '');
    const [from, to] = m ? [Number(m[1]), Number(m[2])] : [0, weights.length - 1];
    res.writeHead(m ? 206 : 200, { 'content-length': to - from + 1, ...(m ? { 'content-range': `bytes ${from}-${to}/${weights.length}` } : {}) });
    if (cutAt === undefined) return void res.end(weights.subarray(from, to + 1));
    res.write(weights.subarray(from, cutAt), () => res.destroy());
  };
}

const app = await startStore({ registryTimeoutMs: 600, downloadRetries: 0 });
t.teardown(app.close);
const pull = (name: string) => call(app, 'POST', '/api/pull', { name, insecure: true, stream: false });

t.test('redirects and token realms may not lead to file: URLs, and foreign answers are never quoted', async (t) => {
  const internal = await server(t, (_req, res) => res.writeHead(403, { 'content-type': 'text/plain' }).end(`${SECRET}\n`.repeat(20)));
  const reg = await server(
    t,
    registry((_req, res) => res.writeHead(307, { location: 'file:///etc/passwd' }).end()),
  );

  const toFile = await pull(`${reg.host}/library/m`);
  t.equal(toFile.status, 502);
  t.match(toFile.body.error, /sent a redirect to a "file:" URL; only http: and https: is followed/);

  reg.handle.fn = registry((_req, res) => res.writeHead(307, { location: `http://${internal.host}/data` }).end());
  const toInternal = await pull(`${reg.host}/library/m`);
  t.equal(toInternal.status, 502);
  t.match(toInternal.body.error, `${internal.host}, where the registry redirected, answered 403`);
  t.notMatch(toInternal.text, SECRET, 'no byte of the foreign answer');

  reg.handle.fn = (_req, res) => res.writeHead(401, { 'www-authenticate': 'Bearer realm="file:///etc/passwd",service="x"' }).end();
  const realm = await pull(`${reg.host}/library/m`);
  t.equal(realm.status, 502);
  t.match(realm.body.error, /sent a token realm to a "file:" URL/);

  // The registry's own OCI error is still named; its other text is not.
  reg.handle.fn = (_req, res) =>
    res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code: 'DENIED', message: 'no access' }], note: SECRET }));
  const denied = await pull(`${reg.host}/library/m`);
  t.equal(denied.status, 502);
  t.match(denied.body.error, `registry ${reg.host} answered 403 (DENIED: no access)`);
  t.notMatch(denied.text, SECRET);
  t.same((await call(app, 'GET', '/api/tags')).body.models, []);
});

t.test('a public registry may not lead to private addresses; a private one may', async (t) => {
  t.ok(isPrivateAddress('127.0.0.1') && isPrivateAddress('10.1.2.3') && isPrivateAddress('169.254.169.254') && isPrivateAddress('::1'));
  t.ok(isPrivateAddress('::ffff:192.168.1.1') && isPrivateAddress('fd00::1') && isPrivateAddress('fe80::1'));
  t.notOk(isPrivateAddress('93.184.216.34') || isPrivateAddress('2606:4700::1'));
  const policy = new TargetPolicy(false);
  // `.invalid` never resolves: a registry whose addresses are unknown counts as public.
  const pub = new URL('https://registry.invalid/v2/library/m/manifests/latest');
  for (const target of ['https://127.0.0.1:9/x', 'https://10.0.0.5/x', 'https://[::1]/x', 'https://169.254.169.254/latest/meta-data', 'https://localhost/x']) {
    await t.rejects(
      policy.check(new URL(target), pub, 'redirect'),
      { statusCode: 502, message: /a private address; a public registry may not lead there/ },
      target,
    );
  }
  await t.rejects(policy.check(new URL('http://storage.example/x'), pub, 'redirect'), { message: /"http:" URL; only https: is followed/ }, 'no downgrade');
  t.type(await policy.check(new URL('https://storage.example/x'), pub, 'redirect'), 'function', 'a public name connects through the public-only lookup');
  t.equal(await policy.check(new URL('http://10.0.0.5/x'), new URL('http://127.0.0.1:5000/v2/'), 'redirect'), undefined, 'a loopback registry may');
  t.equal(await new TargetPolicy(true).check(new URL('https://10.0.0.5/x'), pub, 'redirect'), undefined, 'registryPrivateTargets allows it');
});

t.test('hosts that are no URL host are a 400; a registry that stalls after its headers is a 504', async (t) => {
  for (const name of ['127.0.s.1:9/library/none', 'a:b:c/ns/m']) {
    for (const route of ['/api/pull', '/api/push']) {
      const res = await call(app, 'POST', route, { name, insecure: true });
      t.equal(res.status, 400, `${route} ${name}`);
      t.match(res.body.error, /is not a valid registry host/);
    }
  }
  const stalling = await server(t, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json', 'content-length': 1000 });
    res.write('{"schemaVersion"'); // and nothing more
  });
  const res = await pull(`${stalling.host}/library/m`);
  t.equal(res.status, 504);
  t.match(res.body.error, `registry ${stalling.host} stopped sending for 0.6 s`);
});

t.test('a blob cut mid-way fails the pull, is never listed, and the next pull resumes it', async (t) => {
  const reg = await server(t, registry(serveWeights(600_000)));
  const name = `${reg.host}/library/m`;
  const failed = await pull(name);
  t.equal(failed.status, 502);
  t.match(failed.body.error, `download of ${sha(weights)}`);
  t.same((await call(app, 'GET', '/api/tags')).body.models, [], 'no model');
  t.equal((await app.fetch(`/api/blobs/${sha(weights)}`, { method: 'HEAD' })).status, 404, 'the partial blob is not a blob');

  const ranges: string[] = [];
  const serve = serveWeights();
  reg.handle.fn = registry((req, res) => {
    ranges.push(req.headers.range ?? '');
    serve(req, res);
  });
  const done = await pull(name);
  t.equal(done.status, 200, done.text);
  t.ok(Number(/bytes=(\d+)-/.exec(ranges[0] ?? '')?.[1]) >= 500_000, `resumed from the cut (${ranges[0]})`);
  t.match((await call(app, 'GET', '/api/tags')).body.models, [{ name: `${name}:latest` }]);
  const blobs = await readdir(path.join(app.dataDir, 'models', 'blobs'));
  t.notOk(
    blobs.some((b) => b.includes('partial')),
    'no partial file remains',
  );
});
