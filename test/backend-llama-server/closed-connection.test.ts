/**
 * A request that llama-server's connection drops before any answer (it closes its connection
 * after a streamed answer, and the next request may already be written on it): sent once more on
 * a new connection while the server runs, and an error once the second try fails too. The server
 * is a stand-in script that speaks the part of llama-server's HTTP interface that
 * `LlamaServer.start` reads (`/health`, `/props`, `/v1/models`), and drops the connection of the
 * first `DROPS` requests to `/echo` without answering.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { LlamaServer, type ServerSpec } from '../../plugins/backend-llama-server/server.js';

const STAND_IN = `#!/usr/bin/env node
const http = require('node:http');
const argv = process.argv.slice(2);
const arg = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
let drops = Number(process.env.DROPS);
let echoes = 0;
const json = (res, body) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
};
const server = http.createServer((req, res) => {
  if (req.url === '/health') return json(res, { status: 'ok' });
  if (req.url === '/props') return json(res, { default_generation_settings: { n_ctx: 256 }, total_slots: 1 });
  if (req.url === '/v1/models') return json(res, { data: [{ meta: { n_ctx_train: 256, n_vocab: 32 } }] });
  if (req.url === '/echo') {
    echoes++;
    if (drops > 0) {
      drops--;
      req.socket.destroy();
      return;
    }
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => json(res, { echoes, body: JSON.parse(body) }));
    return;
  }
  res.writeHead(404).end();
});
const port = arg('--port');
server.listen(port ? Number(port) : arg('--host'));
`;

const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-closed-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const binary = path.join(dir, 'llama-server');
await writeFile(binary, STAND_IN);
await chmod(binary, 0o755);

const spec: ServerSpec = {
  binary,
  model: path.join(dir, 'model.gguf'),
  threads: 1,
  batchThreads: 1,
  parallel: 1,
  contextPerSlot: 256,
  batchSize: 256,
  embedding: false,
  startTimeoutMs: 20_000,
};

async function started(drops: number): Promise<LlamaServer> {
  const server = await LlamaServer.start(spec, () => undefined, { ...process.env, DROPS: String(drops) });
  t.teardown(() => server.stop());
  return server;
}

t.test('a connection dropped before the answer: the request is sent again and answered', async (t) => {
  const server = await started(1);
  const answer = (await server.fetchJson('POST', '/echo', { prompt: 'hi' }, AbortSignal.timeout(10_000))) as { echoes: number; body: unknown };
  t.same(answer.body, { prompt: 'hi' }, 'the same body on the second try');
  t.equal(answer.echoes, 2, 'one dropped try, then the answer');
});

t.test('dropped twice: a clear engine error, and no third try', async (t) => {
  const server = await started(2);
  await t.rejects(server.fetchJson('POST', '/echo', { prompt: 'hi' }, AbortSignal.timeout(10_000)), /llama-server did not answer/);
  const after = (await server.fetchJson('POST', '/echo', { prompt: 'again' }, AbortSignal.timeout(10_000))) as { echoes: number };
  t.equal(after.echoes, 3, 'the failed request was tried twice; the next one is answered at once');
});
