/**
 * The hooks plugins declare (`provides`, `requires`) checked at start: a required hook without an
 * enabled provider stops `lia serve` with exit code 2 naming the plugin that needs it, the hook
 * and the built-in plugin that provides it; two providers of one hook stop it naming both; a
 * plugin whose setup does not provide what it declares stops the start.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { main } from '../../core/cli/main.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';
import { HOST_ONLY } from '../helpers/plugin-sets.js';

const CLAIMS_NETWORK = path.join(ROOT, 'test/fixtures/plugins/claims-network/index.ts');

/** `lia serve` in this process with a configuration file; the exit code and stderr. */
async function serve(yaml: string): Promise<{ code: number; err: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-providers-'));
  const config = path.join(dir, 'lia.config.yaml');
  await writeFile(config, yaml);
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let err = '';
  stdout.resume();
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const argv = ['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', path.join(dir, 'data')];
  const code = await main(argv, { stdout, stderr, env: { ...process.env, LIA_CONFIG: config, LIA_LOG_LEVEL: 'silent' } });
  return { code, err };
}

t.test('api-openai without the engine stops the start naming both', async (t) => {
  const r = await serve(
    'plugins:\n  engine: false\n  gguf: false\n  backend-llama-cpp: false\n  backend-llama-server: false\n  backend-transformers: false\n  api-anthropic: false\n',
  );
  t.equal(r.code, 2);
  t.match(r.err, /plugin "api-openai" requires "inference", which no enabled plugin provides; enable "engine", which provides it, or disable "api-openai"/);
  t.notMatch(r.err, /\n\s+at /, 'no stack trace');

  const store = await serve('plugins:\n  model-store: false\n  api-openai: false\n  api-anthropic: false\n');
  t.equal(store.code, 2);
  t.match(store.err, /plugin "engine" requires "models", which no enabled plugin provides; enable "model-store", which provides it, or disable "engine"/);
});

t.test('an engine without the gguf plugin stops the start naming it', async (t) => {
  const r = await serve('plugins:\n  gguf: false\n');
  t.equal(r.code, 2);
  t.match(r.err, /plugin "backend-llama-cpp" needs plugin "gguf", which is not enabled; enable "gguf" or disable "backend-llama-cpp"/);
  const server = await serve('plugins:\n  gguf: false\n  backend-llama-cpp: false\n');
  t.equal(server.code, 2);
  t.match(server.err, /plugin "backend-llama-server" needs plugin "gguf", which is not enabled; enable "gguf" or disable "backend-llama-server"/);
  t.notMatch(r.err, /\n\s+at /, 'no stack trace');
});

t.test('two plugins that provide one hook stop the start naming both', async (t) => {
  const r = await serve(`plugins:\n  claims-network: { module: ${JSON.stringify(CLAIMS_NETWORK)} }\n`);
  t.equal(r.code, 2);
  t.match(r.err, /plugins "host-network" and "claims-network" both provide "network"; enable only one of them/);
});

t.test('a replacement provider serves in place of the built-in one', async (t) => {
  const app = await startTestAppliance({ plugins: { ...HOST_ONLY, 'host-network': false, 'claims-network': { module: CLAIMS_NETWORK } } });
  t.teardown(() => app.close());
  const res = await app.fetch('/system/network');
  t.equal(res.status, 200);
  t.match(await res.json(), { hostname: 'claims-network' });
});

t.test('a plugin whose setup does not provide what it declares stops the start', async (t) => {
  await t.rejects(
    startTestAppliance({ plugins: { ...HOST_ONLY, 'host-network': false, 'claims-network': { module: CLAIMS_NETWORK, options: { provide: false } } } }),
    /plugin "claims-network" declares that it provides "network", but its setup did not provide it/,
  );
});

const INDEXER = path.join(ROOT, 'test/fixtures/plugins/indexer/index.ts');
const CLAIMS_PROXY = path.join(ROOT, 'test/fixtures/plugins/claims-proxy/index.ts');
const SIX = ['svc-inference', 'svc-webui', 'svc-proxy', 'svc-gpu-monitor', 'svc-system-api', 'svc-certs'];

t.test('a service a plugin declares is listed after the configured six and runs like them', async (t) => {
  const app = await startTestAppliance({ plugins: { ...HOST_ONLY, indexer: { module: INDEXER } } });
  t.teardown(() => app.close());
  const list = (await (await app.fetch('/system/services')).json()) as { services: Array<{ name: string; state: string; description: string }> };
  t.same(
    list.services.map((s) => s.name),
    [...SIX, 'svc-indexer'],
    'the six (their plugins disabled or not), then the declared one',
  );
  t.match(
    list.services.find((s) => s.name === 'svc-inference'),
    { state: 'inactive' },
    'svc-inference is listed with the engine disabled',
  );
  t.match(
    list.services.find((s) => s.name === 'svc-indexer'),
    { state: 'active', description: 'Test indexer' },
  );
  const health = (await (await app.fetch('/health', { auth: false })).json()) as { services: Record<string, string> };
  t.equal(health.services['svc-indexer'], 'active');
  const stop = await app.fetch('/system/services/svc-indexer/stop', { method: 'POST' });
  t.equal(stop.status, 200);
  const after = (await (await app.fetch('/system/services')).json()) as { services: Array<{ name: string; state: string }> };
  t.match(
    after.services.find((s) => s.name === 'svc-indexer'),
    { state: 'inactive' },
  );
  const logs = await app.fetch('/system/logs?service=svc-indexer&lines=5');
  t.equal(logs.status, 200, 'its logs are a known service');
});

t.test('a service declared twice, or declared and not implemented, stops the start', async (t) => {
  const r = await serve(`plugins:\n  claims-proxy: { module: ${JSON.stringify(CLAIMS_PROXY)} }\n`);
  t.equal(r.code, 2);
  t.match(r.err, /service "svc-proxy" is declared by both "core" and "claims-proxy"; enable only one of them/);
  await t.rejects(
    startTestAppliance({ plugins: { ...HOST_ONLY, indexer: { module: INDEXER, options: { implement: false } } } }),
    /plugin "indexer" declares service "svc-indexer", but its setup did not implement it/,
  );
});
