/**
 * The API key gate: every non-public route, in every spelling, answers 401 with
 * `WWW-Authenticate: Bearer` in its surface's error format; public routes need no key; wrong
 * keys are told apart from typos; repeated failures get 429; rotation is immediate and atomic.
 *
 * The route walk uses the default configuration, so it covers every route of every plugin.
 */
import { execFile } from 'node:child_process';
import { readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { normalizePath } from '../../core/http/surface.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const run = promisify(execFile);

/** Fills route parameters with plausible values. */
function concrete(url: string): string {
  return url.replace(/:[A-Za-z_]+/g, 'svc-inference').replace(/\*/g, 'library/stories');
}

/** The spellings an attacker might try for one path. */
function spellings(p: string): string[] {
  const segs = p.split('/').filter(Boolean);
  const first = segs[0] ?? '';
  const rest = segs.slice(1).join('/');
  const out = [
    p,
    p.replace(/\//g, '//'),
    `/${first}/./${rest}`,
    `/${first}/x/../${rest}`,
    `/health/../${segs.join('/')}`,
    `/system/ca-cert/../../${segs.join('/')}`,
    `/${first}/${rest}/`,
    p.toUpperCase(),
    `${p}?a=1&key=x`,
    p.replace(/[a-z]/, (c) => `%${c.charCodeAt(0).toString(16)}`),
    `/${first}%2F${rest}`,
    `/${first}/%2e/${rest}`,
    `/${first}\\${rest}`,
  ];
  return [...new Set(out.filter((s) => s.length > 1))];
}

t.test('every protected route refuses every spelling without a key', async (t) => {
  const app = await startTestAppliance();
  t.teardown(app.close);
  const table = app.appliance.routes.list();
  const publicRoutes = table.filter((r) => r.public).map((r) => r.url);
  t.same([...new Set(publicRoutes)].sort(), ['/', '/health', '/system/ca-cert', '/ui/', '/ui/*'].sort(), 'only these routes are public');
  const protectedRoutes = table.filter((r) => !r.public && r.method !== 'HEAD');
  t.ok(protectedRoutes.length >= 10, `walking ${protectedRoutes.length} routes`);
  let checked = 0;
  for (const route of protectedRoutes) {
    for (const spelling of spellings(concrete(route.url))) {
      const res = await app.fetch(spelling, { method: route.method, auth: false, body: route.method === 'GET' || route.method === 'HEAD' ? undefined : '{}' });
      const text = await res.text();
      const where = `${route.method} ${spelling}`;
      if (res.status !== 401) {
        t.fail(`${where} answered ${res.status} without a key: ${text.slice(0, 200)}`);
        continue;
      }
      checked++;
      t.equal(res.headers.get('www-authenticate'), 'Bearer', `${where}: WWW-Authenticate`);
      const body = JSON.parse(text) as { error: unknown };
      const normal = normalizePath(spelling);
      if (/^\/v1\/messages(\/|$)/.test(normal)) {
        t.match(body, { type: 'error', error: { message: String, type: 'authentication_error' } }, `${where}: Anthropic error shape`);
      } else if (/^\/v1(\/|$)/.test(normal) || /^\/(v2\/)?rerank$/.test(normal)) {
        // The rerank paths outside /v1 (llama-server's and vLLM's) answer as /v1/rerank does.
        t.match(body, { error: { message: String, type: 'invalid_request_error', code: 'invalid_api_key' } }, `${where}: OpenAI error shape`);
        t.ok('param' in (body.error as object), `${where}: has param`);
      } else {
        t.type(body.error, 'string', `${where}: Ollama error shape`);
      }
    }
  }
  t.ok(checked > protectedRoutes.length * 10, `${checked} spellings refused`);
});

t.test('public paths need no key', async (t) => {
  // The engine serves Ollama's surface, the heartbeat included.
  const app = await startTestAppliance({ plugins: { ...RUNTIME_ONLY, 'model-store': true, engine: true } });
  t.teardown(app.close);
  t.equal((await app.fetch('/health', { auth: false })).status, 200);
  t.equal((await app.fetch('/system/ca-cert', { auth: false })).status, 200);
  const root = await app.fetch('/', { auth: false });
  t.equal(await root.text(), 'Ollama is running', 'the Ollama heartbeat answers');
});

t.test('wrong keys, typos and malformed headers are told apart; failures are rate limited', async (t) => {
  const app = await startTestAppliance({ plugins: { ...RUNTIME_ONLY, 'auth-api-key': { options: { failureBurst: 5, failureRefillSeconds: 60 } } } });
  t.teardown(app.close);
  const typo = app.key.slice(0, 10) + (app.key[10] === 'A' ? 'B' : 'A') + app.key.slice(11);
  const r1 = await app.fetch('/system/api-keys/rotate', { method: 'POST', headers: { authorization: `Bearer ${typo}` } });
  t.equal(r1.status, 401);
  t.match(await r1.json(), { error: /typo/ });
  const r2 = await app.fetch('/api/tags', { headers: { authorization: 'Bearer sk-something' } });
  t.equal(r2.status, 401);
  t.match(await r2.json(), { error: /invalid API key: LIA keys look like/ });
  const r3 = await app.fetch('/api/tags', { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
  t.match(await r3.json(), { error: /unsupported Authorization header: expected "Bearer <key>"/ });
  t.equal(
    (await app.fetch('/api/tags', { headers: { authorization: `bearer ${app.key}` } })).status,
    404,
    'the scheme is case-insensitive; the route is just not enabled here',
  );
  // Only tokens shaped like LIA keys count: anything else may belong to another strategy.
  for (let i = 0; i < 20; i++) await app.fetch('/api/tags', { headers: { authorization: 'Bearer nope' } });
  for (let i = 0; i < 4; i++) await app.fetch('/api/tags', { headers: { authorization: `Bearer ${typo}` } });
  const limited = await app.fetch('/api/tags', { headers: { authorization: `Bearer ${typo}` } });
  t.equal(limited.status, 429, 'the sixth wrong key is slowed down');
  t.ok(Number(limited.headers.get('retry-after')) > 0, 'with Retry-After');
  t.match(await limited.json(), { error: /too many failed API keys/ });
  t.equal((await app.fetch('/api/tags', { auth: false })).status, 401, 'a request without a key is not counted, just refused');
  // A client sharing the address (a NAT, a proxy) still gets in with the right key.
  t.equal((await app.fetch('/api/tags')).status, 404, 'the right key passes the gate while the address is limited (404: the route is not enabled here)');
  t.equal((await app.fetch('/api/tags', { headers: { authorization: `Bearer ${typo}` } })).status, 429, 'wrong keys from the address are still limited');
});

t.test('concurrent rotations: the key file always holds the one key that works', async (t) => {
  const app = await startTestAppliance({ plugins: { ...RUNTIME_ONLY, 'auth-api-key': { options: { failureBurst: 1000 } } } });
  t.teardown(app.close);
  const file = path.join(app.dataDir, 'keys', 'master.key');
  let key = app.key;
  const status = async (k: string): Promise<number> => (await app.fetch('/system/ca-cert/../status', { headers: { authorization: `Bearer ${k}` } })).status;
  for (let round = 0; round < 4; round++) {
    const replies = await Promise.all(
      Array.from({ length: 8 }, () => app.fetch('/system/api-keys/rotate', { method: 'POST', headers: { authorization: `Bearer ${key}` } })),
    );
    const statuses = replies.map((r) => r.status);
    // A rotation that started after an earlier one finished may already be refused: the key it sent is dead.
    const keys = (await Promise.all(replies.filter((r) => r.status === 200).map((r) => r.json() as Promise<{ key: string }>))).map((b) => b.key);
    t.ok(keys.length >= 1 && statuses.every((s) => s === 200 || s === 401), `round ${round}: ${keys.length} rotations went through (${statuses.join(' ')})`);
    const inFile = (await readFile(file, 'utf8')).trim();
    t.ok(keys.includes(inFile), `round ${round}: the file holds a key that a rotation returned`);
    t.not(await status(inFile), 401, `round ${round}: the key in the file works`);
    for (const other of keys.filter((k) => k !== inFile)) t.equal(await status(other), 401, `round ${round}: an earlier rotated key is dead`);
    key = inFile;
  }
});

t.test('rotation: new key once, old key dead at once, file atomic and 0600, CLI agrees', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const oldKey = app.key;
  const res = await app.fetch('/system/api-keys/rotate', { method: 'POST' });
  t.equal(res.status, 200);
  t.equal(res.headers.get('cache-control'), 'no-store');
  const { key, hint } = (await res.json()) as { key: string; hint: string };
  t.match(key, /^lia_[A-Za-z0-9_-]{43}_[0-9A-Za-z]{6}$/);
  t.not(key, oldKey);
  t.equal(key.slice(-4), hint);
  t.equal(
    (await app.fetch('/system/api-keys/rotate', { method: 'POST', headers: { authorization: `Bearer ${oldKey}` } })).status,
    401,
    'the old key is refused on the very next request',
  );

  const replies = await Promise.all(Array.from({ length: 40 }, () => app.fetch('/health/../system/status', { headers: { authorization: `Bearer ${key}` } })));
  t.ok(
    replies.every((r) => r.status !== 401),
    'forty concurrent requests with the new key all pass the gate',
  );

  const file = path.join(app.dataDir, 'keys', 'master.key');
  t.equal((await readFile(file, 'utf8')).trim(), key, 'the key file holds the new key');
  t.equal((await stat(file)).mode & 0o777, 0o600);
  const { stdout } = await run(process.execPath, ['bin/lia.js', 'key', 'show'], { env: { ...process.env, LIA_DATA_DIR: app.dataDir } });
  t.equal(stdout.trim(), key, '`lia key show` prints the same key');
  t.match(app.console, new RegExp(`new key ends in …${hint}`), 'the console names the new key by its hint');
  t.notMatch(app.console, new RegExp(key), 'the console does not print the rotated key itself');

  const caFile = path.join(app.dataDir, 'ca.crt');
  await writeFile(caFile, app.ca);
  const env = { ...process.env, LIA_URL: app.url, LIA_API_KEY: key, LIA_CA_CERT: caFile };
  const cli = await run(process.execPath, ['bin/lia.js', 'key', 'rotate'], { env });
  const cliKey = cli.stdout.trim();
  t.match(cliKey, /^lia_/);
  t.equal((await readFile(file, 'utf8')).trim(), cliKey, '`lia key rotate` went through the API and the file agrees');
});
