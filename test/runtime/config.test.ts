/**
 * Configuration: where it is found, what overrides what, and how a bad one stops the start
 * (exit code 2, a message naming the key and the file).
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig } from '../../core/config/load.js';
import type { Config } from '../../core/config/schema.js';
import { loadPlugins } from '../../core/plugin/host.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

/** The config of `cwd` with the non-runtime plugins switched off (the file's own entries are all runtime or extra). */
async function runtimeConfig(cwd: string): Promise<Config> {
  const config = await loadConfig({ cwd, env: {} });
  return { ...config, plugins: { ...config.plugins, ...RUNTIME_ONLY } };
}

async function dir(files: Record<string, string>): Promise<string> {
  const d = await mkdtemp(path.join(os.tmpdir(), 'lia-cfg-'));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(d, name), text);
  return d;
}

t.test('cosmiconfig finds every supported file name', async (t) => {
  const cases: Record<string, string> = {
    'lia.config.yaml': 'port: 9001\n',
    'lia.config.yml': 'port: 9001\n',
    'lia.config.json': '{"port": 9001}',
    'lia.config.mjs': 'export default { port: 9001 }',
    'lia.config.js': 'export default { port: 9001 }',
    '.liarc': 'port: 9001\n',
    '.liarc.json': '{"port": 9001}',
    '.liarc.yaml': 'port: 9001\n',
    'package.json': '{"name":"x","type":"module","lia":{"port":9001}}',
  };
  for (const [file, text] of Object.entries(cases)) {
    const cwd = await dir({ [file]: text, ...(file.endsWith('.js') ? { 'package.json': '{"type":"module"}' } : {}) });
    const config = await loadConfig({ cwd, env: {} });
    t.equal(config.port, 9001, file);
    t.equal(config.source, path.join(cwd, file), `${file} is named as the source`);
  }
});

t.test('defaults, then file, then LIA_* env, then flags', async (t) => {
  const cwd = await dir({ 'lia.config.yaml': 'port: 9001\nhost: 127.0.0.2\nlogLevel: warn\n' });
  const fileOnly = await loadConfig({ cwd, env: {} });
  t.equal(fileOnly.host, '127.0.0.2');
  t.equal(fileOnly.bodyLimit, 8 * 1024 * 1024, 'unset keys keep their defaults');
  t.ok(fileOnly.plugins['pki-local-ca'], 'the default plugin list is there');
  const env = await loadConfig({ cwd, env: { LIA_PORT: '9002', LIA_DATA_DIR: '/tmp/lia-x' } });
  t.equal(env.port, 9002);
  t.equal(env.dataDir, '/tmp/lia-x');
  const flags = await loadConfig({ cwd, env: { LIA_PORT: '9002' }, flags: { port: '9003', host: '::1' } });
  t.equal(flags.port, 9003);
  t.equal(flags.host, '::1');
  t.ok(Object.isFrozen(flags) && Object.isFrozen(flags.plugins), 'the config is frozen');
  t.equal((await loadConfig({ cwd: await dir({}), env: {} })).host, '::', 'the default bind is dual stack');
  t.same(fileOnly.corsOrigins, [], 'no CORS origins by default');
  t.same((await loadConfig({ cwd, env: { LIA_ORIGINS: 'https://a.example, https://b.example:8443' } })).corsOrigins, [
    'https://a.example',
    'https://b.example:8443',
  ]);
});

t.test('a user file switches one plugin off without repeating the list', async (t) => {
  const cwd = await dir({ 'lia.config.yaml': 'plugins:\n  webui: false\n' });
  const config = await loadConfig({ cwd, env: {} });
  t.equal(config.plugins['webui'], false);
  t.equal(config.plugins['pki-local-ca'], true);
});

t.test('bad configuration is an exit-code-2 error naming the key and the file', async (t) => {
  const unknown = await dir({ 'lia.config.yaml': 'port: 8443\nprot: 1\n' });
  const e1 = await loadConfig({ cwd: unknown, env: {} }).catch((e: unknown) => e);
  t.type(e1, ConfigError);
  t.equal((e1 as ConfigError).exitCode, 2);
  t.match((e1 as Error).message, /lia\.config\.yaml: unknown key "prot"/);

  const wrongType = await dir({ '.liarc.json': '{"port": "eighty"}' });
  const e2 = await loadConfig({ cwd: wrongType, env: {} }).catch((e: unknown) => e);
  t.match((e2 as Error).message, /\.liarc\.json: "port" /);

  const nested = await dir({ 'lia.config.json': '{"plugins": {"webui": {"enabeld": true}}}' });
  const e3 = await loadConfig({ cwd: nested, env: {} }).catch((e: unknown) => e);
  t.match((e3 as Error).message, /lia\.config\.json: unknown key "plugins\.webui\.enabeld"/);

  const badEnv = await loadConfig({ cwd: await dir({}), env: { LIA_PORT: 'x' } }).catch((e: unknown) => e);
  t.match((badEnv as Error).message, /LIA_PORT.*"port" must be an integer/);

  const badOrigin = await loadConfig({ cwd: await dir({}), env: { LIA_ORIGINS: 'https://ok.example,https://x.example/path' } }).catch((e: unknown) => e);
  t.type(badOrigin, ConfigError, 'an origin with a path is refused');
  t.match((badOrigin as Error).message, /corsOrigins/);

  const explicit = await loadConfig({ configFile: '/nonexistent/lia.yaml', env: {} }).catch((e: unknown) => e);
  t.match((explicit as Error).message, /nonexistent\/lia\.yaml: cannot read it/);
});

t.test('plugins: unknown names, bad options and missing dependencies stop the start', async (t) => {
  const cwd = await dir({ 'lia.config.yaml': 'plugins:\n  no-such-plugin: true\n' });
  const e1 = await loadPlugins(await runtimeConfig(cwd), {}).catch((e: unknown) => e);
  t.type(e1, ConfigError);
  t.match((e1 as Error).message, /lia\.config\.yaml: plugin "no-such-plugin" cannot be found/);

  const badOpt = await dir({ 'lia.config.yaml': 'plugins:\n  auth-api-key:\n    options:\n      failureBurst: many\n' });
  const e2 = await loadPlugins(await runtimeConfig(badOpt), {}).catch((e: unknown) => e);
  t.match((e2 as Error).message, /lia\.config\.yaml: "plugins\.auth-api-key\.options\.failureBurst"/);

  const unknownOpt = await dir({ 'lia.config.yaml': 'plugins:\n  auth-api-key:\n    options:\n      burst: 3\n' });
  const e3 = await loadPlugins(await runtimeConfig(unknownOpt), {}).catch((e: unknown) => e);
  t.match((e3 as Error).message, /unknown key "plugins\.auth-api-key\.options\.burst"/);

  const hello = path.resolve('test/fixtures/plugins/hello/index.ts');
  const dep = await dir({ 'lia.config.yaml': `plugins:\n  pki-local-ca: false\n  hello:\n    module: ${hello}\n` });
  const e4 = await loadPlugins(await runtimeConfig(dep), {}).catch((e: unknown) => e);
  t.match((e4 as Error).message, /plugin "hello" needs plugin "pki-local-ca", which is not enabled/);

  const missingPkg = await dir({ 'lia.config.yaml': 'plugins:\n  lia-plugin-nope:\n    module: lia-plugin-nope\n' });
  const e5 = await loadPlugins(await runtimeConfig(missingPkg), {}).catch((e: unknown) => e);
  t.match((e5 as Error).message, /plugin "lia-plugin-nope": package "lia-plugin-nope" is not installed; install it beside the configuration/);
});
