/**
 * The registry HTTP client on plain HTTP reads its sockets in large pieces while a body streams
 * (see LargeReadAgent in large-reads.ts), and the HTTP semantics stay Node's: a Content-Length body, a
 * chunked body, keep-alive reuse and redirects all come through intact.
 */
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { HttpClient } from '../../plugins/model-store/registry/http.js';

const BODY = randomBytes(8 * 1024 * 1024 + 123);
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

async function serve(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = http.createServer((req, res) => {
    if (req.url === '/moved') return void res.writeHead(307, { location: '/blob' }).end();
    if (req.url === '/chunked') {
      res.writeHead(200); // no length: chunked
      for (let i = 0; i < BODY.length; i += 300_000) res.write(BODY.subarray(i, i + 300_000));
      return void res.end();
    }
    res.writeHead(200, { 'content-length': BODY.length }).end(BODY);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => server.close(r)));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function read(client: HttpClient, url: string): Promise<{ body: Buffer; largest: number; status: number }> {
  const res = await client.send({ method: 'GET', url: new URL(url) });
  const chunks: Buffer[] = [];
  let largest = 0;
  for await (const c of res.body) {
    chunks.push(c as Buffer);
    largest = Math.max(largest, (c as Buffer).length);
  }
  return { body: Buffer.concat(chunks), largest, status: res.status };
}

t.test('a streaming body arrives in reads larger than 64 KiB, byte for byte', async (t) => {
  const base = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const { body, largest, status } = await read(client, `${base}/blob`);
  t.equal(status, 200);
  t.equal(sha(body), sha(BODY));
  t.ok(largest > 64 * 1024, `largest chunk ${largest} bytes`);
});

t.test('chunked bodies, redirects and reused connections are unchanged', async (t) => {
  const base = await serve(t);
  const client = new HttpClient();
  t.teardown(() => client.close());
  const chunked = await read(client, `${base}/chunked`);
  t.equal(sha(chunked.body), sha(BODY), 'chunked body intact');
  const moved = await read(client, `${base}/moved`);
  t.equal(moved.status, 200);
  t.equal(sha(moved.body), sha(BODY), 'redirect followed');
  for (let i = 0; i < 3; i++) t.equal(sha((await read(client, `${base}/blob`)).body), sha(BODY), `keep-alive request ${i + 1}`);
});
