/**
 * The security sweep: an attack run against a real appliance (`lia serve` in its own process, the
 * built dist/, a fake inference backend), reporting tries and failures per area. Run it with
 *
 *   npm run build && node --conditions=lia-source --import tsx bench/security/sweep.ts [--fuzz 10000] [--rounds 3]
 *
 * Areas and what counts as a failure:
 * - auth: bad credential spellings (none, wrong, typo, other schemes, query tokens, other headers,
 *   duplicates, case, whitespace, expired, revoked, rotated-away) × every guarded route, and path
 *   spellings without a key. A bypass is any answer below 400.
 * - fuzz: random methods, paths (route patterns filled with hostile values), headers and bodies
 *   against the real routes, with the master key so they reach the handlers. Failure: a 5xx.
 * - traversal: `..`, encoded and absolute names in blob digests, model names, copy and create
 *   targets, log services and paths. Failure: an answer below 400 or a body holding a file's text.
 * - slow: connections that send headers slowly, and unauthenticated requests with endless bodies,
 *   while `/health` is probed. Failure: `/health` failing, or an unauthenticated body still being
 *   read after 10 s.
 * - attacks: hostile GGUF headers through `/api/blobs` + `/api/create`, and deeply nested schemas
 *   on every surface. Failure: a 5xx or an answer other than 400 for a refused file or schema.
 * - scopes: a named key per scope × every route of the table in docs/security.md, and a
 *   model allow-list key on every inference route. Failure: allowed where the scope (or list)
 *   forbids it, or refused where it grants it.
 * - every area: a crash is the appliance process exiting or `/health` failing after the area.
 *
 * Then throughput on `GET /api/version`: the master key alone against 50 named keys in use, in
 * alternating rounds of the same run, reported as a ratio with its spread.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { parseArgs } from 'node:util';
import { Pool, request } from 'undici';
import { startApplianceProcess, type ApplianceProcess } from '../lib/appliance-process.js';
import { median } from '../lib/stats.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const { values: flags } = parseArgs({
  options: { fuzz: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '3' }, seconds: { type: 'string', default: '4' } },
});

interface Area {
  tries: number;
  bypass: number;
  fivexx: number;
  crash: number;
  scope: number;
  notes: string[];
}
const areas = new Map<string, Area>();
function area(name: string): Area {
  let a = areas.get(name);
  if (!a) areas.set(name, (a = { tries: 0, bypass: 0, fivexx: 0, crash: 0, scope: 0, notes: [] }));
  return a;
}
function note(a: Area, text: string): void {
  if (a.notes.length < 8) a.notes.push(text.slice(0, 300));
}

// ---------------------------------------------------------------- the appliance

const app: ApplianceProcess = await startApplianceProcess({
  plugins: {
    'host-network': { options: { mdns: 'off' } },
    'fake-backend': { module: path.join(ROOT, 'dist', 'core', 'testing', 'fake-backend.js') },
    'auth-api-key': { options: { failureBurst: 1_000_000 } },
  },
});
let masterKey = app.key;
// A sweep stopped early must not leave its appliance behind.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void app.close().finally(() => process.exit(130)));
process.once('exit', () => {
  try {
    process.kill(app.pid);
  } catch {
    // already gone
  }
});
console.log(`appliance started: ${app.url} (pid ${app.pid})`);
const pool = new Pool(app.url, { connect: { ca: app.ca }, connections: 16, bodyTimeout: 30_000, headersTimeout: 30_000 });

interface Answer {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}
/** One request; `headers` may be a flat array to repeat a header. A transport error is status 0. */
async function send(method: string, url: string, headers: Record<string, string> | string[] = {}, body?: string | Buffer): Promise<Answer> {
  try {
    const res = await request(app.url + url, { method: method, headers, body, dispatcher: pool });
    const text = method === 'HEAD' ? '' : await res.body.text();
    return { status: res.statusCode, text, headers: res.headers };
  } catch (err) {
    return { status: 0, text: String((err as Error).message), headers: {} };
  }
}
const master = (extra: Record<string, string> = {}) => ({ authorization: `Bearer ${masterKey}`, 'content-type': 'application/json', ...extra });

/** Runs `jobs` with at most `width` in flight. */
async function parallel<T>(items: readonly T[], width: number, job: (item: T, i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++;
        await job(items[i]!, i);
      }
    }),
  );
}

function alive(): boolean {
  try {
    process.kill(app.pid, 0);
    return true;
  } catch {
    return false;
  }
}
async function checkAlive(a: Area): Promise<void> {
  const health = await send('GET', '/health');
  if (!alive() || health.status !== 200) {
    a.crash++;
    note(a, `after the area: process ${alive() ? 'alive' : 'gone'}, /health ${health.status}`);
  }
}

// ---------------------------------------------------------------- fixtures: models and keys

async function createFake(name: string, prefix: string): Promise<void> {
  const digest = `sha256:${createHash('sha256').update(prefix).digest('hex')}`;
  await send('POST', `/api/blobs/${digest}`, { authorization: `Bearer ${masterKey}` }, prefix);
  const res = await send('POST', '/api/create', master(), JSON.stringify({ model: name, files: { 'model.fake': digest }, stream: false }));
  if (res.status !== 200) throw new Error(`creating ${name}: ${res.status} ${res.text}`);
}
await createFake('parrot', 'parrot says:');
await createFake('crow', 'crow says:');
console.log('models created');

async function createKey(body: object): Promise<string> {
  const res = await send('POST', '/system/api-keys', master(), JSON.stringify(body));
  if (res.status !== 201) throw new Error(`creating a key: ${res.status} ${res.text}`);
  return (JSON.parse(res.text) as { key: string }).key;
}
const SCOPES = ['inference', 'models:read', 'models:write', 'system:read', 'system:admin', 'keys:admin'];
const scoped = new Map<string, string>();
for (const s of SCOPES) scoped.set(s, await createKey({ name: `scope-${s.replace(':', '-')}`, scopes: [s] }));
const limited = await createKey({ name: 'parrot-only', scopes: ['inference'], models: ['parrot'] });
const expired = await createKey({ name: 'expiring', scopes: SCOPES, expires_at: new Date(Date.now() + 1000).toISOString() });
const revoked = await createKey({ name: 'revoked', scopes: SCOPES });
await send('DELETE', '/system/api-keys/revoked', master());
const rotatedAway = await createKey({ name: 'rotated', scopes: SCOPES });
await send('POST', '/system/api-keys/rotated/rotate', master());
await new Promise((r) => setTimeout(r, 1100));

// ---------------------------------------------------------------- the route table (docs/security.md, checked against the live table by test/runtime/scopes.e2e.test.ts)

interface Route {
  method: string;
  url: string;
  scope: string;
}
const doc = await readFile(path.join(ROOT, 'docs', 'security.md'), 'utf8');
const section = doc.split('## Route scopes')[1]?.split(/\n## /)[0] ?? '';
const routes: Route[] = [...section.matchAll(/^\| (GET|POST|PUT|DELETE|HEAD|PATCH) \| `([^`]+)` \| `?([^`|]+?)`? \| (\S+) \|$/gm)].map((m) => ({
  method: m[1]!,
  url: m[2]!,
  scope: m[3]!,
}));
const guarded = routes.filter((r) => r.scope !== 'public');
const fill = (url: string, value = 'nope'): string => url.replace(/:[A-Za-z_]+/g, value).replace(/\*/g, `library/${value}`);
const bodyFor = (r: Route): string | undefined => (r.method === 'GET' || r.method === 'HEAD' || r.method === 'DELETE' ? undefined : '{}');
/** Routes that change the box or the master key: never sent with a key that may use them, except by the scopes area. */
const DANGEROUS = new Set([
  'POST /system/services/:name',
  'POST /system/services/:name/:action',
  'POST /system/network/hostname',
  'POST /system/api-keys/rotate',
  'POST /api/pull',
  'POST /api/push',
]);

console.log(`appliance ${app.url} (pid ${app.pid}); ${routes.length} routes, ${guarded.length} guarded`);

// ---------------------------------------------------------------- area: auth spellings × routes

{
  const a = area('auth spellings × routes');
  const body = masterKey.slice(4, -7);
  const typo = `lia_${body.slice(0, -1)}${body.endsWith('A') ? 'B' : 'A'}${masterKey.slice(-7)}`;
  const wrong = `lia_${'A'.repeat(43)}_000000`;
  const bad: Array<[string, Record<string, string> | string[], string?]> = [
    ['no header', {}],
    ['empty bearer', { authorization: 'Bearer ' }],
    ['scheme only', { authorization: 'Bearer' }],
    ['wrong key', { authorization: `Bearer ${wrong}` }],
    ['typo in key', { authorization: `Bearer ${typo}` }],
    ['key upper-cased', { authorization: `Bearer ${masterKey.toUpperCase()}` }],
    ['key truncated', { authorization: `Bearer ${masterKey.slice(0, -1)}` }],
    ['key + suffix', { authorization: `Bearer ${masterKey}x` }],
    ['key + second token', { authorization: `Bearer ${masterKey} extra` }],
    ['Basic scheme', { authorization: `Basic ${Buffer.from(`x:${masterKey}`).toString('base64')}` }],
    ['Token scheme', { authorization: `Token ${masterKey}` }],
    ['raw key, no scheme', { authorization: masterKey }],
    ['Bearer= spelling', { authorization: `Bearer=${masterKey}` }],
    ['x-api-key wrong', { 'x-api-key': wrong }],
    ['api-key header', { 'api-key': masterKey }],
    ['cookie', { cookie: `key=${masterKey}; token=${masterKey}` }],
    ['query ?key', {}, `key=${masterKey}`],
    ['query ?api_key', {}, `api_key=${masterKey}`],
    ['query ?token', {}, `token=${masterKey}`],
    ['query ?authorization', {}, `authorization=Bearer%20${masterKey}`],
    ['duplicate, wrong first', ['authorization', `Bearer ${wrong}`, 'authorization', `Bearer ${masterKey}`]],
    ['duplicate, both wrong', ['authorization', `Bearer ${wrong}`, 'authorization', `Bearer ${typo}`]],
    ['expired named key', { authorization: `Bearer ${expired}` }],
    ['revoked named key', { authorization: `Bearer ${revoked}` }],
    ['rotated-away named key', { authorization: `Bearer ${rotatedAway}` }],
    ['bearer + tab + wrong', { authorization: `Bearer\t${wrong}` }],
    ['lowercase bearer + wrong', { authorization: `bearer ${wrong}` }],
  ];
  const jobs: Array<() => Promise<void>> = [];
  for (const r of guarded) {
    for (const [name, headers, query] of bad) {
      jobs.push(async () => {
        const url = fill(r.url) + (query ? `?${query}` : '');
        const res = await send(
          r.method,
          url,
          Array.isArray(headers) ? [...headers, 'content-type', 'application/json'] : { ...headers, 'content-type': 'application/json' },
          bodyFor(r),
        );
        a.tries++;
        if (res.status >= 500) {
          a.fivexx++;
          note(a, `${r.method} ${url} [${name}]: ${res.status} ${res.text}`);
        } else if (res.status < 400) {
          a.bypass++;
          note(a, `${r.method} ${url} [${name}]: ${res.status}`);
        }
      });
    }
    // The right key in accepted spellings must work (else the spellings test says nothing).
    for (const [name, value] of [
      ['BEARER upper', `BEARER ${masterKey}`],
      ['spaces around', `  Bearer   ${masterKey}  `],
    ] as const) {
      if (DANGEROUS.has(`${r.method} ${r.url}`)) continue;
      jobs.push(async () => {
        const res = await send(r.method, fill(r.url), { authorization: value, 'content-type': 'application/json' }, bodyFor(r));
        a.tries++;
        if (res.status === 401) note(a, `right key refused as "${name}" on ${r.method} ${r.url}`);
        if (res.status >= 500) {
          a.fivexx++;
          note(a, `${r.method} ${r.url} [${name}]: ${res.status} ${res.text}`);
        }
      });
    }
  }
  // Path spellings of guarded routes without a key.
  const spell = (p: string): string[] => [
    `/${p}`,
    `${p}/`,
    p.toUpperCase(),
    p.replace('/', '/./'),
    p.replace(/\/([a-z])/, (_, c: string) => `/%${c.charCodeAt(0).toString(16)}`),
    `/health/..${p}`,
    `/health/%2e%2e${p}`,
    `${p}%00`,
    `${p};x=1`,
    `${p}?`,
    `${p}#frag`,
    `/${p.slice(1).replace(/\//g, '%2F')}`,
    `/ui/..${p}`,
    `/system/ca-cert/..${p}`,
  ];
  for (const r of guarded) {
    for (const p of spell(fill(r.url))) {
      jobs.push(async () => {
        const res = await send(r.method, p, { 'content-type': 'application/json' }, bodyFor(r));
        a.tries++;
        if (res.status >= 500) {
          a.fivexx++;
          note(a, `${r.method} ${p} [no key]: ${res.status} ${res.text}`);
        } else if (res.status < 400) {
          a.bypass++;
          note(a, `${r.method} ${p} [no key]: ${res.status}`);
        }
      });
    }
  }
  await parallel(jobs, 16, (job) => job());
  await checkAlive(a);
  console.log(`auth: ${a.tries} tries`);
}

// ---------------------------------------------------------------- area: fuzz

{
  const a = area('fuzz');
  let seed = 20261125;
  const rand = (): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const junk = (): string =>
    pick([
      '',
      'a',
      '..',
      '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      'x'.repeat(Math.floor(rand() * 3000)),
      '%C0%AF',
      '%00',
      '%ff%fe',
      'ü漢字',
      'sha256:' + 'f'.repeat(64),
      'sha256-' + '0'.repeat(63),
      'library/parrot:latest',
      'parrot',
      'a:b:c',
      '127.0.0.1:9/x/y',
      '-1',
      'NaN',
      '1e309',
      '{}',
      '[]',
      '%',
      '%%32%65',
      '....//....//',
    ]);
  const value = (depth: number): unknown => {
    const k = Math.floor(rand() * (depth > 4 ? 6 : 9));
    switch (k) {
      case 0:
        return null;
      case 1:
        return rand() < 0.5;
      case 2:
        return pick([0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, 4096]);
      case 3:
        return junk();
      case 4:
        return 'parrot';
      case 5:
        return pick(['', 'json', 'user', 'assistant', 'system', 'tool', '5m', '-1']);
      case 6:
        return Array.from({ length: Math.floor(rand() * 4) }, () => value(depth + 1));
      default: {
        const keys = [
          'model',
          'prompt',
          'messages',
          'role',
          'content',
          'stream',
          'format',
          'options',
          'tools',
          'keep_alive',
          'input',
          'name',
          'scopes',
          'models',
          'limits',
          'source',
          'destination',
          'files',
          'template',
          'system',
          'think',
          'num_predict',
          'response_format',
          'max_tokens',
          'raw',
          'context',
          'images',
        ];
        return Object.fromEntries(Array.from({ length: Math.floor(rand() * 6) }, () => [pick(keys), value(depth + 1)]));
      }
    }
  };
  const deep = (n: number): string => '['.repeat(n) + ']'.repeat(n);
  const bodies = (): string | Buffer | undefined =>
    pick<() => string | Buffer | undefined>([
      () => undefined,
      () => JSON.stringify(value(0)),
      () => JSON.stringify({ model: 'parrot', ...(value(1) as object) }),
      () => JSON.stringify({ model: 'parrot', messages: [{ role: 'user', content: junk() }], stream: rand() < 0.5, options: { num_predict: 3 } }),
      () => JSON.stringify({ model: 'parrot', prompt: junk(), stream: false, options: { num_predict: 3 } }),
      () => '{"model":',
      () => '\u0000\u0001\u0002',
      () => deep(Math.floor(rand() * 5000)),
      () => Buffer.from(Array.from({ length: 64 }, () => Math.floor(rand() * 256))),
      () => 'model=parrot&prompt=hi',
      () => JSON.stringify({ __proto__: { admin: true }, constructor: { prototype: { x: 1 } } }),
    ])();
  const targets = routes.filter((r) => !DANGEROUS.has(`${r.method} ${r.url}`));
  const n = Number(flags.fuzz);
  const jobs = Array.from({ length: n }, (_, i) => i);
  const statuses: Record<string, number> = {};
  await parallel(jobs, 16, async () => {
    const r = pick(targets);
    const method = rand() < 0.8 ? r.method : pick(['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']);
    let url = fill(r.url, encodeURIComponent(junk()).slice(0, 2000) || 'x');
    if (rand() < 0.2) url = fill(r.url, junk().replace(/[#?]/g, '')) || '/';
    if (rand() < 0.2) url += `?${pick(['lines=1&lines=2', 'service=../../etc', 'lines=-1', 'stream=true', 'x=' + junk(), 'format=%00', 'lines=99999999999'])}`;
    const ct = pick([
      'application/json',
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/octet-stream',
      'multipart/form-data; boundary=x',
      'application/json; charset=utf-16',
      '',
    ]);
    const headers: Record<string, string> = { authorization: `Bearer ${masterKey}` };
    if (ct) headers['content-type'] = ct;
    if (rand() < 0.1) headers['accept-encoding'] = pick(['gzip', 'br', 'identity;q=0', '*']);
    if (rand() < 0.1) headers['origin'] = pick(['https://evil.example', 'null']);
    if (rand() < 0.05)
      headers['x-request-id'] = junk()
        .replace(/[^\x20-\x7e]/g, '?')
        .slice(0, 500);
    const body = method === 'GET' || method === 'HEAD' ? undefined : bodies();
    if (!url.startsWith('/')) url = '/' + url;
    const res = await send(method, url, headers, body);
    a.tries++;
    statuses[res.status] = (statuses[res.status] ?? 0) + 1;
    if (res.status >= 500 || res.status === 0) {
      a.fivexx++;
      note(a, `${method} ${url.slice(0, 120)} (${typeof body === 'string' ? body.slice(0, 80) : 'bytes'}): ${res.status} ${res.text.slice(0, 160)}`);
    }
  });
  await checkAlive(a);
  console.log(`fuzz: ${a.tries} tries; statuses ${JSON.stringify(statuses)}`);
  // The fuzz holds the master key, so it deletes and overwrites models: the next areas need them back.
  await createFake('parrot', 'parrot says:');
  await createFake('crow', 'crow says:');
}

// ---------------------------------------------------------------- area: traversal

{
  const a = area('traversal');
  const names = [
    '../../../../etc/passwd',
    '..%2f..%2f..%2fetc%2fpasswd',
    '%2e%2e/%2e%2e/etc/passwd',
    '/etc/passwd',
    '....//....//etc/passwd',
    '..\\..\\etc\\passwd',
    'library/../../../etc/passwd',
    'parrot/../../../../etc/passwd',
    'registry.ollama.ai/../../etc/passwd:latest',
    '%252e%252e%252fetc%252fpasswd',
    '..%c0%af..%c0%afetc%c0%afpasswd',
    'parrot:../../x',
    'x\u0000.gguf',
    '.',
    '..',
    '~/.ssh/id_rsa',
    'file:///etc/passwd',
    'sha256:../../../etc/passwd',
    'sha256-' + '../'.repeat(10) + 'etc/passwd',
  ];
  const leak = (text: string): boolean => /root:.*:0:0:|BEGIN (RSA |EC |OPENSSH )?PRIVATE KEY|lia_[A-Za-z0-9_-]{43}_/.test(text);
  const cases: Array<[string, string, string | undefined]> = [];
  for (const n of names) {
    const e = encodeURIComponent(n);
    cases.push(
      ['HEAD', `/api/blobs/${e}`, undefined],
      ['POST', `/api/blobs/${e}`, 'x'],
      ['HEAD', `/api/blobs/${n}`, undefined],
      ['POST', '/api/show', JSON.stringify({ model: n })],
      ['DELETE', '/api/delete', JSON.stringify({ model: n })],
      ['POST', '/api/copy', JSON.stringify({ source: 'parrot', destination: n })],
      ['POST', '/api/copy', JSON.stringify({ source: n, destination: 'copy-target' })],
      ['POST', '/api/create', JSON.stringify({ model: n, from: 'parrot', stream: false })],
      ['POST', '/api/create', JSON.stringify({ model: 'trav', files: { [n]: `sha256:${'0'.repeat(64)}` }, stream: false })],
      ['POST', '/api/create', JSON.stringify({ model: 'trav', from: n, stream: false })],
      ['POST', '/api/generate', JSON.stringify({ model: n, prompt: 'x', stream: false })],
      ['GET', `/v1/models/${e}`, undefined],
      ['GET', `/v1/models/${n}`, undefined],
      ['GET', `/system/logs?service=${e}&lines=5`, undefined],
      ['GET', `/system/services/${e}`, undefined],
      ['GET', `/ui/${n}`, undefined],
      ['GET', `/ui/${e}`, undefined],
      ['DELETE', `/system/api-keys/${e}`, undefined],
    );
  }
  await parallel(cases, 8, async ([method, url, body]) => {
    const res = await send(method, url, master(), body);
    a.tries++;
    if (res.status >= 500 || res.status === 0) {
      a.fivexx++;
      note(a, `${method} ${url} ${body ?? ''}: ${res.status} ${res.text.slice(0, 160)}`);
    } else if (leak(res.text)) {
      a.bypass++;
      note(a, `${method} ${url}: a file's text in the answer`);
    } else if (res.status < 400 && !(method === 'GET' && url.startsWith('/ui/')) && !/\/\.\.?$/.test(url)) {
      // The UI answers its index for unknown paths (a single-page app), and a path ending in `/.`
      // or `/..` is its parent by URL rules (`/v1/models/.` lists the models); anything else must refuse.
      a.bypass++;
      note(a, `${method} ${url} ${body ?? ''}: ${res.status}`);
    }
  });
  await checkAlive(a);
  console.log(`traversal: ${a.tries} tries`);
}

// ---------------------------------------------------------------- area: slow connections

{
  const a = area('slow connections');
  const port = new URL(app.url).port;
  const open = (payload: string, trickle: string, everyMs: number): Promise<{ socket: tls.TLSSocket; closed: () => boolean }> =>
    new Promise((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port: Number(port), servername: 'localhost', ca: app.ca });
      let closed = false;
      socket.on('error', () => (closed = true));
      socket.on('close', () => (closed = true));
      socket.on('data', () => {});
      socket.once('secureConnect', () => {
        socket.write(payload);
        const timer = setInterval(() => (closed ? clearInterval(timer) : socket.write(trickle)), everyMs);
        timer.unref();
        resolve({ socket, closed: () => closed });
      });
    });
  const N = 200;
  const slowHeaders = await Promise.all(Array.from({ length: N }, () => open('GET /api/tags HTTP/1.1\r\nHost: localhost\r\n', 'X-a: b\r\n', 1000)));
  const endless = await Promise.all(
    Array.from({ length: N }, () =>
      open(
        'POST /api/chat HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
        '400\r\n' + 'x'.repeat(1024) + '\r\n',
        50,
      ),
    ),
  );
  a.tries += 2 * N;
  const health: number[] = [];
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    const t0 = performance.now();
    const res = await send('GET', '/health');
    health.push(res.status === 200 ? performance.now() - t0 : -1);
    await new Promise((r) => setTimeout(r, 200));
  }
  const failed = health.filter((h) => h < 0).length;
  if (failed > 0) {
    a.crash++;
    note(a, `/health failed ${failed} of ${health.length} times under ${N} slow-header and ${N} endless-body connections`);
  }
  const stillReading = endless.filter((c) => !c.closed()).length;
  if (stillReading > 0) {
    a.bypass++;
    note(a, `${stillReading} of ${N} unauthenticated endless bodies still open after 10 s`);
  }
  const slowOpen = slowHeaders.filter((c) => !c.closed()).length;
  note(
    a,
    `after 10 s: ${slowOpen} of ${N} slow-header connections open (closed by the headers timeout later), ${stillReading} of ${N} endless unauthenticated bodies open; /health median ${median(health.filter((h) => h >= 0)).toFixed(1)} ms, max ${Math.max(...health).toFixed(1)} ms`,
  );
  for (const c of [...slowHeaders, ...endless]) c.socket.destroy();
  await checkAlive(a);
  console.log(`slow: done`);
}

// ---------------------------------------------------------------- area: GGUF and schema attacks

{
  const a = area('GGUF and schema attacks');
  const u32 = (n: number): Buffer => Buffer.from(Uint32Array.of(n).buffer);
  const u64 = (n: bigint): Buffer => Buffer.from(BigUint64Array.of(n).buffer);
  const str = (s: string): Buffer => Buffer.concat([u64(BigInt(Buffer.byteLength(s))), Buffer.from(s)]);
  const head = (kv: bigint, tensors = 0n): Buffer => Buffer.concat([Buffer.from('GGUF'), u32(3), u64(tensors), u64(kv)]);
  const arch = Buffer.concat([str('general.architecture'), u32(8), str('llama')]);
  const padded = (b: Buffer, size: number): Buffer => Buffer.concat([b, Buffer.alloc(Math.max(0, size - b.length))]);
  const files: Array<[string, Buffer, number | 'ok']> = [
    ['huge-array', padded(Buffer.concat([head(2n), arch, str('x.big'), u32(9), u32(0), u64(8_000_000n)]), 8_000_200), 'ok'],
    ['string-array', padded(Buffer.concat([head(2n), arch, str('x.tokens'), u32(9), u32(8), u64(100_000_000n)]), 4096), 400],
    ['huge-string', padded(Buffer.concat([head(2n), arch, str('x.s'), u32(8), u64(2n ** 40n)]), 4096), 400],
    ['kv-count', padded(Buffer.concat([head(2n ** 60n), arch]), 4096), 400],
    ['tensor-count', padded(Buffer.concat([head(1n, 2n ** 40n), arch]), 4096), 400],
    ['truncated', Buffer.concat([head(3n), arch, str('x.n'), u32(4)]), 400],
  ];
  for (const [name, bytes, want] of files) {
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    const up = await send('POST', `/api/blobs/${digest}`, { authorization: `Bearer ${masterKey}` }, bytes);
    const res = await send('POST', '/api/create', master(), JSON.stringify({ model: `gguf-${name}`, files: { [`${name}.gguf`]: digest }, stream: false }));
    a.tries++;
    if (up.status >= 500 || res.status >= 500 || res.status === 0) a.fivexx++;
    const ok = want === 'ok' ? res.status === 200 : res.status === want;
    if (!ok) note(a, `GGUF ${name}: upload ${up.status}, create ${res.status} (wanted ${want}) ${res.text.slice(0, 160)}`);
    if (!ok && res.status < 400 && want !== 'ok') a.bypass++;
  }
  const tags = await send('GET', '/api/tags', master());
  a.tries++;
  if (tags.status !== 200) {
    a.fivexx++;
    note(a, `/api/tags after the GGUF files: ${tags.status}`);
  }
  // Built as text: a client's own JSON.stringify overflows its stack on the deepest ones.
  const nested = (depth: number): string => '{"type":"object","properties":{"a":'.repeat(depth) + '{"type":"string"}' + '}}'.repeat(depth);
  const DEEP = '__deep_schema__';
  const hi = [{ role: 'user', content: 'hi' }];
  for (const depth of [65, 1000, 5000]) {
    const deep = DEEP;
    const tool = [{ type: 'function', function: { name: 'f', parameters: deep } }];
    const cases: Array<[string, object]> = [
      ['/api/generate', { model: 'parrot', prompt: 'hi', format: deep, stream: false }],
      ['/api/chat', { model: 'parrot', messages: hi, format: deep, stream: false }],
      ['/api/chat', { model: 'parrot', messages: hi, tools: tool, stream: false }],
      ['/v1/chat/completions', { model: 'parrot', messages: hi, response_format: { type: 'json_schema', json_schema: { name: 's', schema: deep } } }],
      ['/v1/chat/completions', { model: 'parrot', messages: hi, tools: tool }],
      ['/v1/responses', { model: 'parrot', input: 'hi', text: { format: { type: 'json_schema', name: 's', schema: deep } } }],
      ['/v1/messages', { model: 'parrot', max_tokens: 8, messages: hi, tools: [{ name: 'f', input_schema: deep }] }],
    ];
    for (const [url, body] of cases) {
      const res = await send('POST', url, master({ 'anthropic-version': '2023-06-01' }), JSON.stringify(body).replace(`"${DEEP}"`, nested(depth)));
      a.tries++;
      if (res.status >= 500 || res.status === 0) {
        a.fivexx++;
        note(a, `schema depth ${depth} on ${url}: ${res.status} ${res.text.slice(0, 160)}`);
      } else if (res.status !== 400) {
        a.bypass++;
        note(a, `schema depth ${depth} on ${url}: ${res.status}, not a 400: ${res.text.slice(0, 120)}`);
      }
    }
  }
  await checkAlive(a);
  console.log(`attacks: ${a.tries} tries`);
}

// ---------------------------------------------------------------- area: scoped keys × routes

{
  const a = area('scoped keys × routes');
  const implied: Record<string, string[]> = { 'models:write': ['models:read'], 'system:admin': ['system:read'] };
  const grants = (held: string, needed: string): boolean => held === needed || (implied[held] ?? []).includes(needed);
  for (const r of guarded) {
    for (const [held, key] of scoped) {
      const allowed = grants(held, r.scope);
      const url = fill(r.url);
      const res = await send(r.method, url, { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, bodyFor(r));
      a.tries++;
      if (r.method === 'POST' && r.url === '/system/api-keys/rotate' && res.status === 200) masterKey = (JSON.parse(res.text) as { key: string }).key;
      if (res.status >= 500) {
        a.fivexx++;
        note(a, `${r.method} ${url} as ${held}: ${res.status} ${res.text.slice(0, 120)}`);
      }
      if (allowed === (res.status === 403) || res.status === 401) {
        a.scope++;
        note(a, `${r.method} ${url} as [${held}]: ${res.status} (${allowed ? 'should be allowed' : 'should be 403'})`);
      }
    }
  }
  // The allow-list key on every inference route, with a model outside its list and one inside.
  const inference: Array<[string, (model: string) => object]> = [
    ['/api/generate', (m) => ({ model: m, prompt: 'hi', stream: false })],
    ['/api/chat', (m) => ({ model: m, messages: [{ role: 'user', content: 'hi' }], stream: false })],
    ['/api/embed', (m) => ({ model: m, input: 'hi' })],
    ['/api/embeddings', (m) => ({ model: m, prompt: 'hi' })],
    ['/v1/chat/completions', (m) => ({ model: m, messages: [{ role: 'user', content: 'hi' }] })],
    ['/v1/completions', (m) => ({ model: m, prompt: 'hi' })],
    ['/v1/embeddings', (m) => ({ model: m, input: 'hi' })],
    ['/v1/responses', (m) => ({ model: m, input: 'hi' })],
    ['/v1/messages', (m) => ({ model: m, max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] })],
    ['/v1/messages/count_tokens', (m) => ({ model: m, messages: [{ role: 'user', content: 'hi' }] })],
  ];
  for (const [url, body] of inference) {
    for (const [model, allowed] of [
      ['crow', false],
      ['crow:latest', false],
      ['CROW', false],
      ['parrot', true],
    ] as const) {
      const res = await send(
        'POST',
        url,
        { authorization: `Bearer ${limited}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        JSON.stringify(body(model)),
      );
      a.tries++;
      if (res.status >= 500) {
        a.fivexx++;
        note(a, `${url} ${model} as parrot-only: ${res.status} ${res.text.slice(0, 120)}`);
      }
      if (allowed ? res.status === 403 : res.status !== 403) {
        a.scope++;
        note(a, `${url} model ${model} as parrot-only: ${res.status} (${allowed ? 'should be allowed' : 'should be 403'})`);
      }
    }
  }
  await checkAlive(a);
  console.log(`scopes: ${a.tries} tries`);
}

// ---------------------------------------------------------------- throughput: master alone vs 50 named keys

const seconds = Number(flags.seconds);
/** The appliance process's CPU time so far (user + system), in milliseconds, from /proc. */
async function cpuMs(): Promise<number> {
  const fields = (await readFile(`/proc/${app.pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in ticks of 1/100 s
}
interface Load {
  perSecond: number;
  /** Server CPU milliseconds per 1,000 answered requests: barely moved by other work on the box. */
  cpuPerK: number;
}
/** `width` workers, each on its own key of `keys` in turn, for `seconds`. */
async function load(keys: readonly string[], width = 32): Promise<Load> {
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  let failed = 0;
  let i = 0;
  const cpu0 = await cpuMs();
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (performance.now() < deadline) {
        const key = keys[i++ % keys.length]!;
        const res = await request(`${app.url}/api/version`, { headers: { authorization: `Bearer ${key}` }, dispatcher: pool });
        await res.body.dump();
        if (res.statusCode === 200) done++;
        else failed++;
      }
    }),
  );
  const cpu = (await cpuMs()) - cpu0;
  if (failed > 0) throw new Error(`${failed} throughput requests failed`);
  return { perSecond: done / seconds, cpuPerK: (cpu / done) * 1000 };
}
// The other named keys go, so "alone" means it; the 50 are created for each such round and revoked after.
for (const name of [
  'scope-inference',
  'scope-models-read',
  'scope-models-write',
  'scope-system-read',
  'scope-system-admin',
  'scope-keys-admin',
  'parrot-only',
  'expiring',
  'rotated',
]) {
  await send('DELETE', `/system/api-keys/${name}`, master());
}
const rounds = Number(flags.rounds);
const alone: Load[] = [];
const fifty: Load[] = [];
const createFifty = async (): Promise<string[]> => {
  const keys: string[] = [];
  for (let k = 0; k < 50; k++) keys.push(await createKey({ name: `bench-${k}`, scopes: ['models:read'] }));
  return keys;
};
const revokeFifty = async (): Promise<void> => {
  for (let k = 0; k < 50; k++) await send('DELETE', `/system/api-keys/bench-${k}`, master());
};
// Warm-up of both paths (connections, JIT), then rounds alternating which condition goes first.
await load([masterKey]);
await load(await createFifty());
await revokeFifty();
for (let round = 0; round < rounds; round++) {
  const measureAlone = async () => alone.push(await load([masterKey]));
  const measureFifty = async () => {
    const keys = await createFifty();
    await new Promise((r) => setTimeout(r, 500));
    fifty.push(await load(keys));
    await revokeFifty();
  };
  if (round % 2 === 0) {
    await measureAlone();
    await measureFifty();
  } else {
    await measureFifty();
    await measureAlone();
  }
  const [a, f] = [alone[round]!, fifty[round]!];
  console.log(
    `round ${round + 1}: master alone ${a.perSecond.toFixed(0)} req/s (${a.cpuPerK.toFixed(0)} CPU ms per 1000), 50 named keys ${f.perSecond.toFixed(0)} req/s (${f.cpuPerK.toFixed(0)})`,
  );
}
// The same window for both: 50 named keys exist; half the workers use the master key, half the named keys.
const sameWindow: number[] = [];
{
  const keys = await createFifty();
  for (let round = 0; round < rounds; round++) {
    const [m, n] = await Promise.all([load([masterKey], 16), load(keys, 16)]);
    sameWindow.push(n.perSecond / m.perSecond);
  }
  await revokeFifty();
}
const ratios = fifty.map((f, i) => f.perSecond / alone[i]!.perSecond);
const cpuRatios = fifty.map((f, i) => alone[i]!.cpuPerK / f.cpuPerK);
const spread = (xs: number[]): string => `median ${median(xs).toFixed(3)}, range ${Math.min(...xs).toFixed(3)}-${Math.max(...xs).toFixed(3)}`;

// ---------------------------------------------------------------- report

const alive1 = alive();
console.log('\n| area | tries | bypass | 5xx | crash | scope violations |\n|---|---|---|---|---|---|');
for (const [name, a] of areas) console.log(`| ${name} | ${a.tries} | ${a.bypass} | ${a.fivexx} | ${a.crash} | ${a.scope} |`);
for (const [name, a] of areas) for (const n of a.notes) console.log(`- ${name}: ${n}`);
console.log(
  `\nthroughput GET /api/version, ${seconds} s × ${rounds} rounds, 32 in flight:\n` +
    `- master alone ${alone.map((x) => x.perSecond.toFixed(0)).join(', ')} req/s; 50 named keys ${fifty.map((x) => x.perSecond.toFixed(0)).join(', ')} req/s\n` +
    `- throughput ratio (50 named / master alone) per round ${ratios.map((r) => r.toFixed(3)).join(', ')} (${spread(ratios)})\n` +
    `- server CPU per request, as a throughput ratio (master CPU / named CPU) ${cpuRatios.map((r) => r.toFixed(3)).join(', ')} (${spread(cpuRatios)})\n` +
    `- same window, 16 workers each (named / master) ${sameWindow.map((r) => r.toFixed(3)).join(', ')} (${spread(sameWindow)})`,
);
console.log(`appliance process alive at the end: ${alive1}`);
await pool.close();
await app.close();
