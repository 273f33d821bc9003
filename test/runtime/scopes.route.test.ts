/**
 * Route scopes: every built-in route declares one, core's gate refuses a principal lacking it with
 * 403 in the surface's error format, and docs/security.md lists exactly the live route table.
 *
 * Principals come from the test-only strategy in test/fixtures/plugins/scoped:
 * `Authorization: Bearer scoped:<scope>[,<scope>]`.
 */
import path from 'node:path';
import { readdir, readFile } from 'node:fs/promises';
import t, { type Test } from 'tap';
import type { Response } from 'undici';
import { normalizePath } from '../../core/http/surface.js';
import { projectPath } from '../../core/paths.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const SCOPED = path.resolve('test/fixtures/plugins/scoped/index.ts');

/** The built-in scopes, and what each one grants besides itself (the rule docs/security.md states). */
const SCOPES = ['inference', 'models:read', 'models:write', 'system:read', 'system:admin', 'keys:admin'];
const ALSO_GRANTS: Record<string, string[]> = { 'models:write': ['models:read'], 'system:admin': ['system:read'] };
const holds = (held: string, needed: string): boolean => held === needed || (ALSO_GRANTS[held] ?? []).includes(needed);

const as = (scopes: string): { authorization: string } => ({ authorization: `Bearer scoped:${scopes}` });

/** Fills route parameters with values that name nothing, so an allowed request changes nothing. */
function concrete(url: string): string {
  return url.replace(/:[A-Za-z_]+/g, 'nope').replace(/\*/g, 'library/nope');
}

/** Checks a 403 in the error format of the path's surface, naming the scope needed. */
async function expectForbidden(t: Test, res: Response, where: string, needed: string, method: string): Promise<void> {
  t.equal(res.status, 403, `${where}: 403`);
  if (method === 'HEAD') return;
  const body = (await res.json()) as { error: unknown };
  const path = normalizePath(where.split(' ')[1] as string);
  if (/^\/v1\/messages(\/|$)/.test(path)) {
    t.match(body, { type: 'error', error: { message: String, type: 'permission_error' } }, `${where}: Anthropic error shape`);
    t.match((body.error as { message: string }).message, `"${needed}"`, `${where}: names the scope`);
  } else if (/^\/v1(\/|$)/.test(path) || /^\/(v2\/)?rerank$/.test(path)) {
    // The rerank paths outside /v1 (llama-server's and vLLM's) answer as /v1/rerank does.
    t.match(body, { error: { message: String, type: 'permission_error' } }, `${where}: OpenAI error shape`);
    t.ok('param' in (body.error as object) && 'code' in (body.error as object), `${where}: has param and code`);
    t.match((body.error as { message: string }).message, `"${needed}"`, `${where}: names the scope`);
  } else {
    t.type(body.error, 'string', `${where}: Ollama error shape`);
    t.match(body.error, `"${needed}"`, `${where}: names the scope`);
  }
}

t.test('every route of the default appliance declares a scope, and the gate enforces it', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { 'host-network': { options: { mdns: 'off' } }, scoped: { module: SCOPED } } });
  t.teardown(app.close);
  const table = app.appliance.routes.list();
  const guarded = table.filter((r) => !r.public);
  t.ok(guarded.length >= 25, `walking ${guarded.length} routes`);
  for (const route of guarded) t.ok(route.scope !== null, `${route.method} ${route.url} declares a scope`);

  for (const route of guarded) {
    const needed = route.scope ?? '*';
    const url = concrete(route.url);
    const body = route.method === 'GET' || route.method === 'HEAD' ? undefined : '{}';
    for (const held of [...SCOPES, '*', '']) {
      const where = `${route.method} ${url} as [${held}]`;
      const res = await app.fetch(url, { method: route.method, headers: { ...as(held), 'content-type': 'application/json' }, body });
      if (held === '*' || holds(held, needed)) {
        t.not(res.status, 401, `${where}: authenticated`);
        t.not(res.status, 403, `${where}: allowed (answered ${res.status})`);
        await res.arrayBuffer();
      } else {
        await expectForbidden(t, res, `${route.method} ${url}`, needed, route.method);
      }
    }
  }

  for (const route of table.filter((r) => r.public)) {
    // A public wildcard serves files (the console's): ask for one that exists.
    const url = route.url.replace('*', 'index.html');
    const res = await app.fetch(url, { method: route.method, auth: false });
    await res.arrayBuffer();
    t.ok(res.status < 400, `public ${route.method} ${route.url} needs nothing (${res.status})`);
    const none = await app.fetch(url, { method: route.method, headers: as('') });
    await none.arrayBuffer();
    t.ok(none.status < 400, `public ${route.method} ${route.url} with a scopeless principal (${none.status})`);
  }

  const unknown = await app.fetch('/api/nothing-here', { headers: as('') });
  t.equal(unknown.status, 404, 'an unknown path is a 404 for any principal');
  t.match(await unknown.json(), { error: /no such path/ });
  t.equal((await app.fetch('/api/nothing-here', { auth: false })).status, 401, 'and still needs a principal');
  const wrongMethod = await app.fetch('/api/tags', { method: 'PUT', headers: as('') });
  t.equal(wrongMethod.status, 405, 'a wrong method is a 405 whatever the scopes');
});

t.test('what a user with a models:read key sees', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { 'host-network': { options: { mdns: 'off' } }, scoped: { module: SCOPED } } });
  t.teardown(app.close);
  const reader = { ...as('models:read'), 'content-type': 'application/json' };

  const tags = await app.fetch('/api/tags', { headers: reader });
  t.equal(tags.status, 200);
  t.match(await tags.json(), { models: Array });

  const del = await app.fetch('/api/delete', { method: 'DELETE', headers: reader, body: JSON.stringify({ model: 'stories' }) });
  t.equal(del.status, 403);
  t.same(Object.keys((await del.json()) as object), ['error']);

  const chat = await app.fetch('/v1/chat/completions', {
    method: 'POST',
    headers: reader,
    body: JSON.stringify({ model: 'stories', messages: [{ role: 'user', content: 'hi' }] }),
  });
  t.equal(chat.status, 403);
  const body = (await chat.json()) as { error: { message: string; type: string; param: unknown; code: unknown } };
  t.equal(body.error.type, 'permission_error');
  t.match(body.error.message, /"inference"/);
  t.notMatch(body.error.message, /scoped:/, 'the message names the scope, not the credential');

  const rotate = await app.fetch('/system/api-keys/rotate', { method: 'POST', headers: as('models:write,keys:admin') });
  t.equal(rotate.status, 403, 'only system:admin (or *) rotates the master key; keys:admin is not enough');
  t.match(await rotate.json(), { error: /"system:admin"/ });
  t.equal((await app.fetch('/api/tags')).status, 200, 'the master key (scope *) still works: it was not rotated');
  const rotated = await app.fetch('/system/api-keys/rotate', { method: 'POST', headers: as('system:admin') });
  t.equal(rotated.status, 200, 'system:admin rotates it');
  await rotated.arrayBuffer();
});

t.test('a non-public route that declares no scope needs *', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { ...RUNTIME_ONLY, scoped: { module: SCOPED, options: { undeclaredRoute: true } } } });
  t.teardown(app.close);
  const route = app.appliance.routes.list().find((r) => r.url === '/api/scoped/undeclared' && r.method === 'GET');
  t.equal(route?.scope, null, 'the route table records that it declares none');
  const all = await app.fetch('/api/scoped/undeclared', { headers: as(SCOPES.join(',')) });
  t.equal(all.status, 403, 'every named scope together is not enough');
  t.match(await all.json(), { error: /lacks the scope "\*"/ });
  t.equal((await app.fetch('/api/scoped/undeclared')).status, 200, 'the master key passes');
});

t.test('docs/security.md lists every built-in route with its scope', async (t) => {
  const app = await startTestAppliance({ listen: false, plugins: { 'host-network': { options: { mdns: 'off' } } } });
  t.teardown(app.close);
  const table = app.appliance.routes.list();
  const gets = new Set(table.filter((r) => r.method === 'GET').map((r) => r.url));
  // Fastify answers HEAD for every GET route with the GET route's options; those are not listed.
  const live = table
    .filter((r) => !(r.method === 'HEAD' && gets.has(r.url)))
    .map((r) => `${r.method} ${r.url} ${r.public ? 'public' : r.scope}`)
    .sort();

  const doc = await readFile(projectPath('docs', 'security.md'), 'utf8');
  const section = doc.split('## Route scopes')[1]?.split(/\n## /)[0] ?? '';
  t.ok(section, 'the section exists');
  const plugins = new Set([...(await readdir(projectPath('plugins'))), 'core']);
  const documented: string[] = [];
  for (const m of section.matchAll(/^\| (GET|POST|PUT|DELETE|HEAD|PATCH) \| `([^`]+)` \| `?([^`|]+?)`? \| (\S+) \|$/gm)) {
    documented.push(`${m[1]} ${m[2]} ${m[3]}`);
    t.ok(plugins.has(m[4] as string), `${m[1]} ${m[2]}: "${m[4]}" is a built-in plugin or core`);
  }
  t.same(documented.sort(), live, 'the table is the live route table');
});
