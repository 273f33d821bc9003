/**
 * The CLI's API client as a command sees it: JSON answers parsed, error answers turned into the
 * server's message with the status, an unreachable appliance named, and a base URL's path kept.
 * A plain-HTTP server stands in for the appliance here (the TLS side is the CLI tests').
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { createApiClient } from './client.js';
import { CliError } from './types.js';

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

t.test('json: the body parsed, the key sent, the base path kept, a JSON body encoded', async (t) => {
  const seen: Array<{ url?: string; auth?: string; type?: string; body: string }> = [];
  const { url, server } = await serve((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ url: req.url, auth: req.headers.authorization, type: req.headers['content-type'], body });
      res.setHeader('content-type', 'application/json');
      res.end(req.method === 'DELETE' ? '' : JSON.stringify({ ok: true, method: req.method }));
    });
  });
  t.teardown(() => server.close());
  const client = createApiClient({ url: `${url}/prefix/`, key: 'lia_test', ca: '' });
  t.same(await client.json('GET', '/api/ps'), { ok: true, method: 'GET' });
  t.same(await client.json('POST', '/api/show', { model: 'm' }), { ok: true, method: 'POST' });
  t.same(await client.json('DELETE', '/api/delete'), {}, 'an empty answer is an empty object');
  t.same(seen[0], { url: '/prefix/api/ps', auth: 'Bearer lia_test', type: undefined, body: '' });
  t.same(seen[1], { url: '/prefix/api/show', auth: 'Bearer lia_test', type: 'application/json', body: '{"model":"m"}' });
});

t.test('json: an error answer becomes a CliError with the status and the server message', async (t) => {
  const { url, server } = await serve((req, res) => {
    if (req.url === '/ollama') return void res.writeHead(404).end(JSON.stringify({ error: "model 'x' not found" }));
    if (req.url === '/openai') return void res.writeHead(401).end(JSON.stringify({ error: { message: 'invalid API key' } }));
    res.writeHead(503).end();
  });
  t.teardown(() => server.close());
  const client = createApiClient({ url, key: null, ca: '' });
  await t.rejects(client.json('GET', '/ollama'), new CliError("404 model 'x' not found"));
  await t.rejects(client.json('GET', '/openai'), new CliError('401 invalid API key'));
  await t.rejects(client.json('GET', '/empty'), new CliError('503 Service Unavailable'), 'no body: the status text');
});

t.test('json and request: an appliance that is not there is named, with the reason', async (t) => {
  const { url, server } = await serve(() => undefined);
  await new Promise((resolve) => server.close(resolve));
  const client = createApiClient({ url, key: null, ca: '' });
  await t.rejects(client.json('GET', '/api/ps'), new CliError(`cannot reach ${url}: ECONNREFUSED`));
  await t.rejects(client.request('GET', '/api/ps'), new CliError(`cannot reach ${url}: ECONNREFUSED`));
});
