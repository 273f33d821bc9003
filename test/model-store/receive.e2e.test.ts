/**
 * A blob download's body on plain HTTP is tapped off the socket into the file's ring (see
 * registry/receive.ts and large-reads.ts): the file gets exactly the body's bytes, the hash sees
 * them in order, bytes past the wanted range are ignored, a body shorter than the range ends at
 * its Content-Length, a slow body outlasts the stall limit while a stopped one is cut at it, a
 * cut connection is a network error that keeps what arrived,
 * and bodies that cannot be tapped (chunked, or not in place) still come through the parser.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { BlobFile } from '../../plugins/model-store/registry/blob-file.js';
import { HttpClient } from '../../plugins/model-store/registry/http.js';
import { receiveBody } from '../../plugins/model-store/registry/receive.js';

const BODY = randomBytes(24 * 1024 * 1024 + 77);
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

interface Served {
  base: string;
  /** Connections the server saw closed. */
  closed: number;
}

async function serve(t: { teardown(fn: () => unknown): void }): Promise<Served> {
  const served: Served = { base: '', closed: 0 };
  const server = http.createServer((req, res) => {
    if (req.url === '/chunked') {
      res.writeHead(200);
      for (let i = 0; i < BODY.length; i += 500_000) res.write(BODY.subarray(i, i + 500_000));
      return void res.end();
    }
    if (req.url === '/slow' || req.url === '/stall') {
      // 1 MB every 100 ms; '/stall' stops after two and keeps the connection open.
      const total = req.url === '/slow' ? 10 : 2;
      res.writeHead(200, { 'content-length': 10 * 1_000_000 });
      let sent = 0;
      const timer = setInterval(() => {
        if (sent === total) return clearInterval(timer);
        res.write(BODY.subarray(sent * 1_000_000, ++sent * 1_000_000));
        if (sent === 10) res.end();
      }, 100);
      req.socket.on('close', () => clearInterval(timer));
      return;
    }
    if (req.url === '/short') {
      // A complete response that is shorter than the range the client wants; the connection stays open.
      return void res.writeHead(200, { 'content-length': 5_000_000 }).end(BODY.subarray(0, 5_000_000));
    }
    if (req.url === '/cut') {
      // Promises the whole body, sends 5 MB, then drops the connection.
      res.writeHead(200, { 'content-length': BODY.length });
      res.write(BODY.subarray(0, 5_000_000), () => setTimeout(() => req.socket.destroy(), 50));
      return;
    }
    res.writeHead(200, { 'content-length': BODY.length }).end(BODY);
  });
  server.on('connection', (s: Socket) => s.on('close', () => served.closed++));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => server.close(r)));
  served.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return served;
}

async function target(t: { teardown(fn: () => unknown): void }): Promise<{ file: BlobFile; filePath: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-receive-'));
  const filePath = path.join(dir, 'blob-partial');
  await writeFile(filePath, '');
  const file = await BlobFile.open(filePath, BODY.length);
  t.teardown(async () => {
    await file.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { file, filePath };
}

/** Receives `url` into a fresh file; counts the ring regions the socket read into. */
async function receive(t: Parameters<typeof target>[0], client: HttpClient, url: string, limit: number, inPlace: boolean) {
  const { file, filePath } = await target(t);
  let regions = 0;
  let copies = 0;
  const region = file.region.bind(file);
  file.region = (max: number) => {
    const r = region(max);
    if (r) regions++;
    return r;
  };
  const write = file.write.bind(file);
  file.write = (...args: Parameters<BlobFile['write']>) => (copies++, write(...args));
  const res = await client.send({ method: 'GET', url: new URL(url) });
  let received = 0;
  let written = 0;
  let error = null as (Error & { code?: string }) | null;
  await receiveBody(res.body, {
    file,
    pos: 0,
    limit,
    hash: true,
    inPlace,
    onBytes: (n) => (received += n),
    onWritten: (n) => (written += n),
  }).catch((err: Error) => (error = err));
  await file.drain();
  const digest = await file.finish();
  return { received, written, regions, copies, digest, error, bytes: await readFile(filePath) };
}

t.test('a Content-Length body lands in the ring in place, byte for byte, and its connection is closed', async (t) => {
  const served = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const r = await receive(t, client, `${served.base}/blob`, BODY.length, true);
  t.equal(r.error, null);
  t.equal(r.received, BODY.length);
  t.equal(r.written, BODY.length);
  t.equal(r.digest, sha(BODY), 'the hash saw the body in order');
  t.ok(r.bytes.equals(BODY), 'the file holds the body');
  t.ok(r.regions > 10, `${r.regions} socket reads landed in the ring`);
  // At most the bytes the parser had with the head and the one read already under way are copied.
  t.ok(r.copies <= 2, `${r.copies} copies`);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(served.closed, 1, 'the tapped connection is not reused (its parser never saw the body)');
  const again = await receive(t, client, `${served.base}/blob`, BODY.length, true);
  t.equal(again.digest, sha(BODY), 'the next request opens a new connection and works');
});

t.test('bytes past the wanted range are ignored', async (t) => {
  const served = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const limit = 10 * 1024 * 1024 + 3;
  const r = await receive(t, client, `${served.base}/blob`, limit, true);
  t.equal(r.received, limit);
  t.equal(r.written, limit);
  t.equal(r.digest, sha(BODY.subarray(0, limit)));
  t.ok(r.bytes.subarray(0, limit).equals(BODY.subarray(0, limit)));
  t.ok(r.bytes.subarray(limit).equals(Buffer.alloc(BODY.length - limit)), 'nothing written past the range');
});

t.test('a connection cut mid-body fails the receive with a network error, and what arrived is on disk', async (t) => {
  const served = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const r = await receive(t, client, `${served.base}/cut`, BODY.length, true);
  t.equal(r.error?.code, 'ECONNRESET', 'an error the download retries');
  t.equal(r.received, 5_000_000, 'the bytes sent before the cut');
  t.equal(r.written, 5_000_000);
  t.ok(r.bytes.subarray(0, 5_000_000).equals(BODY.subarray(0, 5_000_000)));
  t.equal(r.digest, sha(BODY.subarray(0, 5_000_000)));
});

t.test('a body shorter than the wanted range ends at its own end, not at a stall', async (t) => {
  const served = await serve(t);
  const client = new HttpClient({ timeoutMs: 5000 });
  t.teardown(() => client.close());
  const r = await receive(t, client, `${served.base}/short`, BODY.length, true);
  t.equal(r.error, null, 'no stall error: the tap stopped at the Content-Length');
  t.equal(r.received, 5_000_000);
  t.ok(r.regions > 0, 'it was tapped');
  t.ok(r.bytes.subarray(0, 5_000_000).equals(BODY.subarray(0, 5_000_000)));
});

t.test('a slow body that keeps coming outlasts the stall limit; one that stops is cut at it', async (t) => {
  const served = await serve(t);
  const client = new HttpClient({ timeoutMs: 350 });
  t.teardown(() => client.close());
  const slow = await receive(t, client, `${served.base}/slow`, 10 * 1_000_000, true);
  t.equal(slow.error, null, 'a second of steady reads, each within the limit');
  t.equal(slow.received, 10 * 1_000_000);
  t.ok(slow.regions > 0, 'it was tapped');
  t.equal(slow.digest, sha(BODY.subarray(0, 10 * 1_000_000)));
  // The server keeps the stalled connection open, so only the stall limit can end this receive.
  const stalled = await receive(t, client, `${served.base}/stall`, 10 * 1_000_000, true);
  t.equal(stalled.error?.code, 'LIA_STALL', 'the stall is the error the download retries');
  t.equal(stalled.received, 2 * 1_000_000, 'what arrived before it is kept');
});

t.test('a chunked body, or one not to be read in place, comes through the HTTP parser intact', async (t) => {
  const served = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const chunked = await receive(t, client, `${served.base}/chunked`, BODY.length, true);
  t.equal(chunked.regions, 0, 'a chunked body is never tapped');
  t.equal(chunked.digest, sha(BODY));
  t.ok(chunked.bytes.equals(BODY));
  const copied = await receive(t, client, `${served.base}/blob`, BODY.length, false);
  t.equal(copied.regions, 0);
  t.ok(copied.copies > 10, `${copied.copies} batches copied`);
  t.equal(copied.digest, sha(BODY));
  t.ok(copied.bytes.equals(BODY));
});
