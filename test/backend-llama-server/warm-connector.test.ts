/**
 * The connection to llama-server opened ahead (plugins/backend-llama-server/warm-connector.ts),
 * against a real HTTP server that behaves as llama-server does: it closes the connection after
 * each streamed answer, and ends a connection left idle. Each request's connection is told by its
 * local port; the server notes when it accepted each one.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import t, { type Test } from 'tap';
import { Pool } from 'undici';
import { warmConnector } from '../../plugins/backend-llama-server/warm-connector.js';

/** A server that streams a short answer and closes the connection after it, as llama-server does. */
async function closingServer(idleMs = 5000): Promise<{ origin: string; accepted: Map<number, number>; opened: () => number; close(): Promise<void> }> {
  const accepted = new Map<number, number>();
  let opened = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', connection: 'close' });
      res.write(`data: {"port":${req.socket.remotePort}}\n\n`);
      res.end();
    });
  });
  server.keepAliveTimeout = idleMs;
  server.on('connection', (socket: Socket) => {
    opened++;
    accepted.set(socket.remotePort!, performance.now());
    // An idle connection (no request yet) is ended after `idleMs`, as cpp-httplib does.
    socket.setTimeout(idleMs, () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    accepted,
    opened: () => opened,
    close: () => new Promise((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

async function ask(pool: Pool): Promise<{ port: number; sentAt: number }> {
  const sentAt = performance.now();
  const res = await pool.request({ method: 'POST', path: '/completion', body: '{}' });
  const text = await res.body.text();
  return { port: (JSON.parse(text.slice('data: '.length)) as { port: number }).port, sentAt };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

/** A {@link closingServer} and a pool on the connector, all closed when test `t` ends. */
async function setUp(t: Test, o: { idleMs?: number; maxAgeMs?: number } = {}) {
  const server = await closingServer(o.idleMs);
  const connector = warmConnector({ timeout: 5000 }, o.maxAgeMs !== undefined ? { maxAgeMs: o.maxAgeMs } : {});
  const pool = new Pool(server.origin, { connect: connector });
  t.teardown(async () => {
    connector.close();
    await pool.close();
    await server.close();
  });
  return { server, connector, pool };
}

t.test('after the first request, each goes on a connection that was open before it was sent', async (t) => {
  const { server, pool } = await setUp(t);
  const ports: number[] = [];
  for (let i = 0; i < 5; i++) {
    const { port, sentAt } = await ask(pool);
    ports.push(port);
    if (i > 0) t.ok(server.accepted.get(port)! < sentAt, `request ${i + 1} found its connection open`);
    await settle();
  }
  t.equal(new Set(ports).size, 5, 'a new connection each time: the server closed each after its answer');
});

t.test('a spare the server ended while idle is not handed out: the request connects anew and is answered', async (t) => {
  const { server, pool } = await setUp(t, { idleMs: 100 });
  await ask(pool);
  await new Promise((resolve) => setTimeout(resolve, 400)); // the spare opened after it is ended by the server
  const { port, sentAt } = await ask(pool);
  t.ok(server.accepted.get(port)! >= sentAt, 'connected for the request');
  await new Promise((resolve) => setTimeout(resolve, 400)); // the spare opened after it is ended too
  const quiet = server.opened();
  await new Promise((resolve) => setTimeout(resolve, 400));
  t.equal(server.opened(), quiet, 'an idle server is not sent new spares once the last one ended');
});

t.test('a spare older than its age limit is dropped, not handed out', async (t) => {
  const { server, pool } = await setUp(t, { maxAgeMs: 100 });
  await ask(pool);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const { port, sentAt } = await ask(pool);
  t.ok(server.accepted.get(port)! >= sentAt, 'a fresh connection for the request');
});

t.test('closed: the spare is dropped and no more are opened', async (t) => {
  const { server, connector, pool } = await setUp(t);
  await ask(pool);
  await settle();
  t.equal(server.opened(), 2, 'the request and one spare');
  connector.close();
  await settle();
  const { port } = await ask(pool);
  t.ok(port > 0, 'a request still connects');
  await settle();
  t.equal(server.opened(), 3, 'only the request connected; no spare after it');
});
