/**
 * A client that pipelines requests on its TLS connections and never reads the answers costs the
 * appliance bounded memory (docs/security.md, Connections): past the cap of requests being answered
 * on one connection the connection is closed, and a connection that closes takes the answers queued
 * on it along, so the shutdown drain counts none of them afterwards. Keyed clients keep being served.
 */
import tls from 'node:tls';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';
import { waitFor } from '../helpers/wait.js';

const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
t.teardown(() => app.close());

/** Opens a TLS connection, writes `count` pipelined keyless requests at once, never reads; resolves when the server closes it. */
function flood(count: number, path: string): Promise<{ closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ port: app.port, host: '127.0.0.1', servername: 'localhost', ca: app.ca }, () => {
      socket.pause(); // never read a byte of the answers
      socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\n\r\n`.repeat(count));
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ closedByServer: false });
    }, 20_000);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ closedByServer: true });
    });
  });
}

t.test('keyless pipelining without reading: each connection closed, nothing left counted in flight', async (t) => {
  const rounds = await Promise.all(Array.from({ length: 20 }, (_, i) => flood(400, i % 2 ? '/health' : '/api/tags')));
  t.ok(
    rounds.every((r) => r.closedByServer),
    'the appliance closed every flooding connection',
  );
  const left = await waitFor('the drain to count no request in flight', () => app.appliance.drain.inFlight() === 0 || null, { timeoutMs: 10_000 }).then(
    () => 0,
    () => app.appliance.drain.inFlight(),
  );
  t.equal(left, 0, 'no answer of a closed connection stays counted (or held) in flight');
  const res = await app.fetch('/health');
  t.equal(res.status, 200, 'the appliance still answers');
  await res.arrayBuffer();
});

t.test('a client that pipelines a few requests and reads them gets every answer', async (t) => {
  const body = await new Promise<string>((resolve, reject) => {
    let text = '';
    const socket = tls.connect({ port: app.port, host: '127.0.0.1', servername: 'localhost', ca: app.ca }, () => {
      socket.write(`GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n`.repeat(7) + 'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n');
    });
    socket.on('data', (d: Buffer) => (text += d.toString()));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
  t.equal(body.match(/HTTP\/1\.1 200 OK/g)?.length, 8, 'eight pipelined requests, eight answers');
});
