/**
 * What an attack sweep of the front door checks: security headers on every answer (a 401 and a
 * 404 included), CORS only for the configured origins with key-less preflights, router and parser
 * failures in the surface's error format with a 4xx, a refused request whose body is never read,
 * and the dual-stack default bind.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import t from 'tap';
import { Agent, fetch } from 'undici';
import { loadConfig } from '../../core/config/load.js';
import { startAppliance } from '../../core/main.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { HOST_ONLY } from '../helpers/plugin-sets.js';

const ORIGIN = 'https://chat.example.com';

let app: TestAppliance;
t.before(async () => {
  app = await startTestAppliance({
    plugins: { ...HOST_ONLY, 'model-store': true, engine: true, 'api-openai': true },
    env: { LIA_ORIGINS: `${ORIGIN}, https://other.example.com` },
  });
});
t.teardown(() => app.close());

/** Writes raw bytes over TLS and collects what comes back until the server closes. */
function rawExchange(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: app.port, ca: app.ca, servername: 'localhost' }, () => socket.write(request));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
  });
}

t.test('security headers on every answer; the web UI keeps its own CSP', async (t) => {
  const answers = {
    '/health': await app.fetch('/health', { auth: false }),
    '/api/tags': await app.fetch('/api/tags'),
    'a 401': await app.fetch('/api/tags', { auth: false }),
    'a 404': await app.fetch('/no/such/path'),
  };
  t.same(
    Object.values(answers).map((r) => r.status),
    [200, 200, 401, 404],
  );
  for (const [what, res] of Object.entries(answers)) {
    const hsts = res.headers.get('strict-transport-security') ?? '';
    t.match(hsts, /max-age=(\d+)/, `${what}: HSTS`);
    t.ok(Number(/max-age=(\d+)/.exec(hsts)?.[1]) >= 31_536_000, `${what}: HSTS for at least a year`);
    t.notMatch(hsts, /preload/, `${what}: HSTS without preload`);
    t.equal(res.headers.get('x-content-type-options'), 'nosniff', `${what}: nosniff`);
    t.equal(res.headers.get('x-frame-options'), 'DENY', `${what}: no framing`);
    t.match(res.headers.get('content-security-policy'), /frame-ancestors 'none'/, `${what}: CSP forbids framing`);
    t.equal(res.headers.get('referrer-policy'), 'no-referrer', `${what}: no referrer`);
    t.equal(res.headers.get('cross-origin-opener-policy'), 'same-origin', `${what}: helmet's other defaults too`);
    t.equal(res.headers.get('x-permitted-cross-domain-policies'), 'none', `${what}: no cross-domain policy files`);
  }
  const ui = await app.fetch('/ui/', { auth: false });
  t.equal(ui.status, 200);
  t.match(await ui.text(), /<html/i, 'the web UI page is served');
  const csp = ui.headers.get('content-security-policy') ?? '';
  t.match(csp, /script-src 'self'/, "the console's scripts come from this origin only");
  t.notMatch(csp, /unsafe-inline|unsafe-eval/, 'no inline script or style is allowed');
  t.match(ui.headers.get('strict-transport-security'), /max-age=/);
});

t.test('CORS: preflights of listed origins pass without a key; nothing for other origins', async (t) => {
  const preflight = (origin: string, pathname = '/v1/chat/completions') =>
    app.fetch(pathname, {
      method: 'OPTIONS',
      auth: false,
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
  const ok = await preflight(ORIGIN);
  t.equal(ok.status, 204, 'a preflight needs no key');
  t.equal(ok.headers.get('access-control-allow-origin'), ORIGIN);
  t.match(ok.headers.get('access-control-allow-methods'), /GET.*POST.*DELETE.*HEAD/);
  const allowed = (ok.headers.get('access-control-allow-headers') ?? '').toLowerCase();
  for (const h of ['authorization', 'content-type', 'x-api-key']) t.match(allowed, h, `the request header ${h} is allowed`);
  t.equal(ok.headers.get('access-control-allow-credentials'), null, 'no cookies: keys are sent explicitly');
  t.equal((await preflight('https://other.example.com', '/api/tags')).status, 204, 'every listed origin');

  const foreign = await preflight('https://evil.example.net');
  t.equal(foreign.status, 401, 'a preflight of another origin meets the gate');
  t.same(
    [...foreign.headers.keys()].filter((h) => h.startsWith('access-control-')),
    [],
    'and gets no Access-Control-* header',
  );

  const noKey = await app.fetch('/api/tags', { auth: false, headers: { origin: ORIGIN } });
  t.equal(noKey.status, 401, 'the real request still needs the key');
  t.equal(noKey.headers.get('access-control-allow-origin'), ORIGIN, 'the page can read the 401');
  const withKey = await app.fetch('/api/tags', { headers: { origin: ORIGIN } });
  t.equal(withKey.status, 200);
  t.equal(withKey.headers.get('access-control-allow-origin'), ORIGIN);
  t.match(withKey.headers.get('access-control-expose-headers'), /Retry-After/);
  t.equal(
    (await app.fetch('/api/tags', { method: 'OPTIONS', auth: false, headers: { origin: ORIGIN } })).status,
    401,
    'an OPTIONS request that is no preflight needs the key',
  );
});

t.test('router and parser failures answer 4xx in the surface format', async (t) => {
  const badUrl = await app.fetch('/v1/models%C0%AF', { auth: false });
  t.equal(badUrl.status, 400);
  t.match(await badUrl.json(), { error: { message: /percent-encoded/, type: 'invalid_request_error' } }, 'OpenAI shape under /v1');
  t.match(badUrl.headers.get('strict-transport-security'), /max-age=31536000/, 'with the security headers');
  const badApi = await app.fetch('/api/show%C0%AF', { auth: false });
  t.equal(badApi.status, 400);
  t.match(await badApi.json(), { error: /percent-encoded/ }, 'Ollama shape elsewhere');

  const long = await app.fetch(`/system/services/${'a'.repeat(300)}`, { method: 'POST' });
  t.equal(long.status, 414);
  t.match(await long.json(), { error: /longer than the router accepts/ });

  const twice = await app.fetch('/system/logs?service=svc-proxy&lines=1&lines=2');
  t.equal(twice.status, 400, 'a query parameter given twice');
  t.match(await twice.json(), { error: /lines/ });

  const garbage = await rawExchange('G@T / HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(garbage, /^HTTP\/1\.1 400 /, 'a malformed request line');
  t.match(garbage, /\r\n\r\n\{"error":"malformed HTTP request"\}$/);
  t.match(garbage, /\r\nStrict-Transport-Security: max-age=31536000\r\n/, 'with the security headers');
  const badV1 = await rawExchange('GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n');
  t.match(badV1, /^HTTP\/1\.1 400 /);
  t.match(badV1, /"error":\{"message":"malformed HTTP request","type":"invalid_request_error"/, 'in the OpenAI shape when the path is under /v1');
});

t.test('a refused request is answered and its connection closed without reading the body', async (t) => {
  const LIMIT = 64 * 1024 * 1024;
  const result = await new Promise<{ head: string; sent: number }>((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: app.port, ca: app.ca, servername: 'localhost' });
    let head = '';
    let sent = 0;
    let closed = false;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const pump = (): void => {
      while (!closed && sent < LIMIT) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once('drain', pump);
      }
      if (closed) return;
      reject(new Error(`the server read ${LIMIT} bytes of an unauthenticated body without closing`));
      socket.destroy();
    };
    socket.on('secureConnect', () => {
      socket.write('POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n');
      pump();
    });
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (head += d));
    socket.on('error', () => undefined); // the server resets a connection it stopped reading
    socket.on('close', () => {
      closed = true;
      resolve({ head, sent });
    });
  });
  t.match(result.head, /^HTTP\/1\.1 401 /, 'the client reads the 401');
  t.match(result.head, /connection: close/i);
  t.ok(result.sent < LIMIT, `the connection closed while the client was still sending (${result.sent} bytes sent of 1 GiB)`);
});

t.test('the default bind is dual stack: 127.0.0.1 and ::1 both answer', async (t) => {
  const hasIpv6Loopback = Object.values(os.networkInterfaces()).some((list) => list?.some((a) => a.address === '::1'));
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-test-'));
  const config = await loadConfig({ env: { LIA_LOG_LEVEL: 'silent' }, cwd: dataDir, flags: { port: '0', dataDir } });
  t.equal(config.host, '::', 'the default host is ::');
  const running = await startAppliance(
    { ...config, plugins: { ...config.plugins, ...HOST_ONLY, 'host-gpu': false, 'host-services': false, 'host-network': false } },
    { console: () => undefined, logDestination: null },
  );
  const agent = new Agent({ connect: { ca: running.hooks.tls.get().rootCertificatePem() } });
  t.teardown(async () => {
    await running.close();
    await agent.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  t.equal((await fetch(`https://127.0.0.1:${running.port}/health`, { dispatcher: agent })).status, 200, 'IPv4 loopback answers');
  if (!hasIpv6Loopback) return void t.comment('this machine has no IPv6 loopback (::1): the IPv6 half is not checked');
  t.equal((await fetch(`https://[::1]:${running.port}/health`, { dispatcher: agent })).status, 200, 'IPv6 loopback answers');
});
