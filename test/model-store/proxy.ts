/**
 * A small HTTP proxy in front of the test registry that records every request and can misbehave
 * on purpose: cut a response after some bytes (a dropped connection), stall (send some bytes and
 * then nothing), or redirect to another host name.
 *
 * @module
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyAction =
  | { kind: 'pass' }
  /** Forward, but destroy the socket once `after` body bytes went out. */
  | { kind: 'cut'; after: number }
  /** Forward `after` body bytes, then go silent (keep the socket open). */
  | { kind: 'stall'; after: number }
  /** Forward the body in small slices with a pause between them (a slow link). */
  | { kind: 'slow'; chunk: number; delayMs: number }
  /** Answer by itself (a challenge, a token service, an error page). */
  | { kind: 'respond'; status: number; headers?: Record<string, string>; body?: string }
  /** Answer 307 to the same path on `base` (e.g. another host name of the registry). */
  | { kind: 'redirect'; base: string };

export interface RecordedRequest {
  method: string;
  url: string;
  range?: string;
  authorization?: string;
}

export interface TestProxy {
  host: string;
  port: number;
  requests: RecordedRequest[];
  /** Decides what to do with each request; defaults to passing everything. */
  decide: (req: RecordedRequest, index: number) => ProxyAction;
  close(): Promise<void>;
}

export async function startProxy(targetPort: number): Promise<TestProxy> {
  const sockets = new Set<import('node:net').Socket>();
  const proxy: TestProxy = {
    host: '',
    port: 0,
    requests: [],
    decide: () => ({ kind: 'pass' }),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
  const server = http.createServer((req, res) => {
    const rec: RecordedRequest = { method: req.method ?? 'GET', url: req.url ?? '/', range: req.headers.range, authorization: req.headers.authorization };
    const index = proxy.requests.push(rec) - 1;
    const action = proxy.decide(rec, index);
    if (action.kind === 'respond') {
      req.resume();
      res.writeHead(action.status, action.headers ?? {}).end(action.body ?? '');
      return;
    }
    if (action.kind === 'redirect') {
      res.writeHead(307, { location: `${action.base}${req.url}` }).end();
      return;
    }
    const upstream = http.request(
      { host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: { ...req.headers, host: `127.0.0.1:${targetPort}` } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        if (action.kind === 'pass') {
          up.pipe(res);
          return;
        }
        if (action.kind === 'slow') {
          void (async () => {
            for await (const data of up) {
              for (let i = 0; i < (data as Buffer).length; i += action.chunk) {
                if (res.destroyed) return;
                res.write((data as Buffer).subarray(i, i + action.chunk));
                await new Promise((r) => setTimeout(r, action.delayMs));
              }
            }
            res.end();
          })().catch(() => res.destroy());
          return;
        }
        let sent = 0;
        up.on('data', (chunk: Buffer) => {
          if (sent >= action.after) return;
          const take = chunk.subarray(0, action.after - sent);
          sent += take.length;
          res.write(take);
          if (sent >= action.after) {
            up.destroy();
            if (action.kind === 'cut') setTimeout(() => res.socket?.destroy(), 20);
          }
        });
        up.on('end', () => res.end());
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  proxy.port = (server.address() as AddressInfo).port;
  proxy.host = `127.0.0.1:${proxy.port}`;
  return proxy;
}
