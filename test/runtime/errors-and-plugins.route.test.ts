/**
 * Errors in each surface's format (400 bad JSON, 413 too large, 404, 405, validation), and the
 * plugin system seen from outside: a third-party plugin outside `plugins/` adds a route, an auth
 * strategy and a GPU provider; disabling a plugin removes its routes and nothing else.
 */
import path from 'node:path';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const HELLO = path.resolve('test/fixtures/plugins/hello/index.ts');

t.test('a third-party plugin contributes a route, an auth strategy and a host provider', async (t) => {
  const app = await startTestAppliance({
    listen: false,
    plugins: { ...RUNTIME_ONLY, hello: { module: HELLO, options: { greeting: 'hi', guestToken: 'guest-secret-123' } } },
  });
  t.teardown(app.close);
  const asMaster = await app.fetch('/api/hello');
  t.same(await asMaster.json(), { message: 'hi, master' });
  const asGuest = await app.fetch('/api/hello', { auth: false, headers: { authorization: 'Guest guest-secret-123' } });
  t.same(await asGuest.json(), { message: 'hi, guest' }, 'the plugin’s own auth strategy admits its token');
  const wrongGuest = await app.fetch('/api/hello', { auth: false, headers: { authorization: 'Guest nope-nope-nope' } });
  t.equal(wrongGuest.status, 401);
  t.same(await wrongGuest.json(), { error: 'wrong guest token' });
  t.ok(
    app.hooks.gpu.list().some((g) => g.name === 'hello-gpu'),
    'the GPU provider is registered',
  );
});

/** The runtime with the OpenAI surface (api-openai needs the engine, which needs the store). */
const WITH_OPENAI = { ...RUNTIME_ONLY, 'model-store': true, engine: true, 'api-openai': true };

t.test('errors come in the surface’s format with the right status', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { ...WITH_OPENAI, hello: { module: HELLO } } });
  t.teardown(app.close);
  const json = { 'content-type': 'application/json' };

  const bad = await app.fetch('/v1/hello/echo', { method: 'POST', headers: json, body: '{"text": ' });
  t.equal(bad.status, 400);
  t.match(await bad.json(), { error: { message: /not valid JSON/, type: 'invalid_request_error', param: null } });

  const invalid = await app.fetch('/v1/hello/echo', { method: 'POST', headers: json, body: '{"text": {"a": 1}}' });
  t.equal(invalid.status, 400);
  t.match(await invalid.json(), { error: { message: /text/, type: 'invalid_request_error' } });

  const big = await app.fetch('/v1/hello/echo', { method: 'POST', headers: json, body: JSON.stringify({ text: 'x'.repeat(9 * 1024 * 1024) }) });
  t.equal(big.status, 413);
  t.match(await big.json(), { error: { message: /larger than the limit/ } });

  const nf = await app.fetch('/api/nothing-here');
  t.equal(nf.status, 404);
  t.match(await nf.json(), { error: /no such path/ });
  const nfOpenAI = await app.fetch('/v1/nothing');
  t.match(await nfOpenAI.json(), { error: { message: /no such path/, type: 'invalid_request_error' } });

  const wrongMethod = await app.fetch('/system/api-keys/rotate');
  t.equal(wrongMethod.status, 405);
  t.equal(wrongMethod.headers.get('allow'), 'DELETE, POST', 'the rotation and the named-key route share the path pattern');
  t.match(await wrongMethod.json(), { error: /not allowed/ });
  const wrongMethodV1 = await app.fetch('/v1/hello/echo', { method: 'DELETE' });
  t.equal(wrongMethodV1.status, 405);
  t.match(await wrongMethodV1.json(), { error: { type: 'invalid_request_error', code: 'method_not_allowed' } });
  t.equal((await app.fetch('/health')).status, 200, 'the appliance is still up');
});

t.test('disabling a plugin removes its routes and nothing else', async (t) => {
  const full = await startTestAppliance({ listen: false, plugins: RUNTIME_ONLY });
  t.teardown(full.close);
  t.equal((await full.fetch('/ui/', { auth: false })).status, 200, 'the web UI is there');
  const app = await startTestAppliance({ listen: false, plugins: { ...RUNTIME_ONLY, 'model-store': true, engine: true, webui: false } });
  t.teardown(app.close);
  t.equal((await app.fetch('/ui/')).status, 404, 'its route is gone');
  const off = await app.fetch('/ui/', { auth: false });
  t.equal(off.status, 404, 'without a key too');
  t.match(off.headers.get('content-type'), /text\/html/);
  t.match(await off.text(), /web console is switched off/, 'a browser gets a page saying the console is off, not "missing API key"');
  t.equal((await app.fetch('/ui/x', { method: 'POST', auth: false })).status, 401, 'anything but GET/HEAD still meets the gate');
  t.equal((await app.fetch('/health', { auth: false })).status, 200);
  t.equal((await app.fetch('/system/ca-cert', { auth: false })).status, 200);
  const root = await app.fetch('/', { auth: false, headers: { accept: 'text/html' } });
  t.equal(root.status, 200, 'the heartbeat no longer redirects to a missing UI');
  const health = (await (await app.fetch('/health', { auth: false })).json()) as { services: Record<string, string> };
  t.equal(health.services['svc-webui'], 'inactive');
});

t.test('without the OpenAI plugin, /v1 errors take the default shape', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { ...RUNTIME_ONLY, hello: { module: HELLO } } });
  t.teardown(app.close);
  const nf = await app.fetch('/v1/nothing');
  t.equal(nf.status, 404);
  t.match(await nf.json(), { error: /no such path/ }, 'the surface that owns /v1 is not enabled, so nothing formats its errors');
});
