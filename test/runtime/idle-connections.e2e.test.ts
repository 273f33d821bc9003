/**
 * Idle and slow connections against a real appliance with short limits (docs/security.md,
 * Connections): a flood of TLS sockets that never send a request is closed by the server while
 * `/health`, a keyed `/api/tags` and an authenticated kept-alive connection still get through, and
 * the process's file descriptors stay bounded by the cap; a slowloris gets 408 and is closed; a
 * keyed upload trickled past the headers limit and a long stream are not cut.
 */
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import net from 'node:net';
import tls from 'node:tls';
import t from 'tap';
import { createFakeModel, FAKE_BACKEND, startTestAppliance } from '../../core/testing/index.js';
import { waitFor } from '../helpers/wait.js';

/** Long enough for the flood to be opened while its first sockets are still waiting. */
const HEADERS_TIMEOUT_MS = 4_000;
const MAX_UNAUTHENTICATED = 100;
/** Sockets in the flood: three times the cap. */
const FLOOD = 300;

const app = await startTestAppliance({
  plugins: {
    'host-network': { options: { mdns: 'off' } },
    'backend-llama-cpp': false,
    'backend-transformers': false,
    'fake-backend': { ...FAKE_BACKEND, options: { tokenDelayMs: 300 } },
  },
  env: {
    LIA_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    LIA_TLS_HANDSHAKE_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    LIA_MAX_UNAUTHENTICATED_CONNECTIONS: String(MAX_UNAUTHENTICATED),
  },
});
t.teardown(() => app.close());

/** File descriptors of this process, which runs both the appliance and the test's clients. */
const fds = () => readdirSync('/proc/self/fd').length;

interface RawSocket {
  socket: tls.TLSSocket;
  /** What the server sent. */
  received: () => string;
  /** Resolves once the handshake is done or the socket closed, whichever comes first. */
  settled: Promise<void>;
  /** Resolves when the socket closes. */
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** A TLS connection to the appliance that sends nothing unless told to. */
function rawSocket(): RawSocket {
  const socket = tls.connect({ host: '127.0.0.1', port: app.port, ca: app.ca, servername: 'localhost' });
  let text = '';
  let isClosed = false;
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (text += d));
  socket.on('error', () => undefined); // A reset from the server is one way of being closed.
  const closed = new Promise<void>((resolve) => socket.once('close', () => ((isClosed = true), resolve())));
  const settled = Promise.race([new Promise<void>((resolve) => socket.once('secureConnect', resolve)), closed]);
  return { socket, received: () => text, settled, closed, isClosed: () => isClosed };
}

t.test('a flood of idle TLS sockets is closed by the server; /health and keys get through; fds stay bounded', async (t) => {
  // An authenticated connection kept alive: evicting idle sockets must not touch it.
  const keyed = rawSocket();
  await keyed.settled;
  const tagsRequest = `GET /api/tags HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${app.key}\r\n\r\n`;
  keyed.socket.write(tagsRequest);
  await waitFor('the first /api/tags answer on the kept-alive connection', () => /\r\n\r\n[\s\S]*\}$/.test(keyed.received()));
  t.match(keyed.received(), /^HTTP\/1\.1 200 /, 'the keyed request on a raw connection is answered');
  t.match(keyed.received(), /keep-alive: timeout=72/i, 'the connection is kept alive for keepAliveTimeoutMs (72 s)');

  const before = fds();
  const flood: RawSocket[] = [];
  const stop = () => {
    for (const s of flood) s.socket.destroy();
  };
  t.teardown(stop);
  let worst = 0;
  for (let i = 0; i < FLOOD; i++) {
    flood.push(rawSocket());
    if (i % 25 === 24) {
      await Promise.all(flood.map((s) => s.settled));
      // Each open client socket holds one descriptor here; the rest above the baseline is the server's.
      worst = Math.max(worst, fds() - before - flood.filter((s) => !s.isClosed()).length);
    }
  }
  await Promise.all(flood.map((s) => s.settled));
  const serverSide = fds() - before - flood.filter((s) => !s.isClosed()).length;
  worst = Math.max(worst, serverSide);
  t.ok(worst <= MAX_UNAUTHENTICATED + 30, `the server held at most ${worst} descriptors for ${FLOOD} idle sockets (cap ${MAX_UNAUTHENTICATED})`);
  t.ok(
    flood.some((s) => s.isClosed()),
    'sockets over the cap were closed at once',
  );

  // While the remaining ones are open and idle: a probe without a key and a client with one.
  t.ok(flood.filter((s) => !s.isClosed()).length > MAX_UNAUTHENTICATED / 2, 'the flood still holds sockets open');
  const health = await app.fetch('/health', { auth: false });
  t.equal(health.status, 200, '/health answers during the flood');
  await health.arrayBuffer();
  const tags = await app.fetch('/api/tags');
  t.equal(tags.status, 200, 'a keyed /api/tags answers during the flood');
  t.ok(Array.isArray(((await tags.json()) as { models?: unknown }).models), '/api/tags lists models');

  await waitFor('every idle socket to be closed by the server', () => flood.every((s) => s.isClosed()), { timeoutMs: 60_000 });
  const answered = flood.filter((s) => s.received() !== '');
  t.ok(
    answered.every((s) => /^HTTP\/1\.1 408 /.test(s.received())),
    `the ${answered.length} sockets that outlived the eviction got 408`,
  );

  t.notOk(keyed.isClosed(), 'the authenticated kept-alive connection survived the flood');
  const first = keyed.received().length;
  keyed.socket.write(tagsRequest);
  await waitFor('the second /api/tags answer', () => keyed.received().length > first && /\}$/.test(keyed.received()));
  t.match(keyed.received().slice(first), /^HTTP\/1\.1 200 /, 'and answers its next request');
  keyed.socket.destroy();
});

t.test('TCP sockets that never start the TLS handshake are capped and closed too', async (t) => {
  const before = fds();
  const sockets: { socket: net.Socket; closed: boolean }[] = [];
  t.teardown(() => sockets.forEach((s) => s.socket.destroy()));
  for (let i = 0; i < 2 * MAX_UNAUTHENTICATED; i++) {
    const entry = { socket: net.connect(app.port, '127.0.0.1'), closed: false };
    entry.socket.on('error', () => undefined);
    entry.socket.once('close', () => (entry.closed = true));
    sockets.push(entry);
  }
  await Promise.all(sockets.map((s) => new Promise<void>((resolve) => (s.closed ? resolve() : s.socket.once('connect', resolve).once('close', resolve)))));
  // Once the server has accepted them all, each one is either still open there or closed here.
  const serverConnections = () =>
    new Promise<number>((resolve, reject) => app.appliance.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  await waitFor('the server to accept every connection', async () => (await serverConnections()) + sockets.filter((s) => s.closed).length >= sockets.length);
  const serverSide = fds() - before - sockets.filter((s) => !s.closed).length;
  t.ok(
    serverSide <= MAX_UNAUTHENTICATED + 30,
    `the server held at most ${serverSide} descriptors for ${sockets.length} silent sockets (cap ${MAX_UNAUTHENTICATED})`,
  );
  const health = await app.fetch('/health', { auth: false });
  t.equal(health.status, 200, '/health answers meanwhile');
  await health.arrayBuffer();
  await waitFor('every silent socket to be closed by the server', () => sockets.every((s) => s.closed), { timeoutMs: 60_000 });
  t.equal(sockets.filter((s) => !s.closed).length, 0, `all ${sockets.length} closed by the server`);
});

t.test('a slowloris sending its headers a byte at a time gets 408 and is closed', async (t) => {
  const slow = rawSocket();
  await slow.settled;
  const head = 'GET /api/tags HTTP/1.1\r\nHost: localhost\r\nX-Padding: ';
  let sent = 0;
  while (!slow.isClosed() && sent < 1_200) {
    // Never ends the headers: the last line grows forever.
    slow.socket.write(sent < head.length ? head[sent]! : 'a');
    sent++;
    await sleep(50);
  }
  t.ok(slow.isClosed(), `the server closed the connection (${sent} bytes sent)`);
  t.match(slow.received(), /^HTTP\/1\.1 408 /, 'with 408');
  t.match(slow.received(), /\r\n\r\n\{"error"/, 'with a JSON error body');
  slow.socket.destroy();
});

t.test('a keyed upload trickled past the headers limit and a long stream are not cut', async (t) => {
  const chunks = 12;
  const piece = 'x'.repeat(1024);
  const bytes = piece.repeat(chunks);
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const trickle = new ReadableStream<Uint8Array>({
    async start(controller) {
      // 12 pieces 600 ms apart: the body takes longer than the headers limit.
      for (let i = 0; i < chunks; i++) {
        await sleep(600);
        controller.enqueue(new TextEncoder().encode(piece));
      }
      controller.close();
    },
  });
  const upload = await app.fetch(`/api/blobs/${digest}`, {
    method: 'POST',
    body: trickle,
    duplex: 'half',
    headers: { 'content-type': 'application/octet-stream' },
  });
  t.equal(upload.status, 201, 'the slow upload completes');
  const head = await app.fetch(`/api/blobs/${digest}`, { method: 'HEAD' });
  t.equal(head.status, 200, 'and the blob is stored');

  // 20 words 300 ms apart: a stream running longer than the headers limit.
  await createFakeModel(app, 'slow', 'slow:');
  const prompt = Array.from({ length: 20 }, (_, i) => `w${i}`).join(' ');
  const res = await app.fetch('/api/generate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'slow', prompt }),
  });
  t.equal(res.status, 200);
  const lines = (await res.text())
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { response?: string; done?: boolean });
  t.equal(lines.at(-1)?.done, true, 'the stream ends with its done line');
  t.equal(
    lines
      .map((l) => l.response ?? '')
      .join('')
      .trim(),
    `slow: ${prompt}`,
    'with every word',
  );
});
