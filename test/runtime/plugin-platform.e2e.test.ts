/**
 * The plugin platform as a third-party author meets it: plugins written in plain JavaScript as
 * npm packages (ESM-only `exports`), importing `lia/plugin` by name; the plugin API version
 * checked at load; a hook one plugin offers and another consumes; CLI commands that come and go
 * with their plugin; errors from a second copy of the package keeping their status; and the
 * configurations that must stop the start with exit code 2.
 */
import { mkdir, mkdtemp, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { main } from '../../core/cli/main.js';
import { loadConfig } from '../../core/config/load.js';
import { startAppliance } from '../../core/main.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

/** A folder with `node_modules/lia` (this checkout) and the given packages, each `{ file: text }`. */
async function project(packages: Record<string, Record<string, string>>): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-plugins-'));
  await mkdir(path.join(dir, 'node_modules'));
  await symlink(ROOT, path.join(dir, 'node_modules', 'lia'), 'dir');
  for (const [name, files] of Object.entries(packages)) {
    const pkg = path.join(dir, 'node_modules', name);
    await mkdir(pkg, { recursive: true });
    for (const [file, text] of Object.entries(files)) await writeFile(path.join(pkg, file), text);
  }
  return dir;
}

/** An ESM-only package: `exports` has only the `import` condition, as many new packages do. */
function esmPackage(name: string, source: string): Record<string, string> {
  return {
    'package.json': JSON.stringify({ name, version: '1.0.0', type: 'module', exports: { '.': { import: './index.js' } } }),
    'index.js': source,
  };
}

const VOICES = esmPackage(
  'lia-plugin-voices',
  `import { definePlugin, Registry } from 'lia/plugin';
export default definePlugin({
  name: 'voices',
  apiVersion: 2,
  description: 'Offers a hook: a registry of voices',
  async setup(app, ctx) {
    const voices = new Registry('voice');
    ctx.hooks.extensions.provide('voices', voices, ctx.name);
    app.get('/api/voices', { config: { scope: 'models:read' } }, async () => ({ voices: voices.list().map((v) => v.name) }));
  },
});
`,
);

const ROBOT = esmPackage(
  'lia-plugin-robot',
  `import { definePlugin, Errors } from 'lia/plugin';
import { Type } from 'lia/utils';
export default definePlugin({
  name: 'robot',
  apiVersion: 2,
  description: 'Adds a voice to the hook of another plugin, a command, and failing routes',
  dependencies: ['voices'],
  options: Type.Object({ voice: Type.String({ default: 'robot' }) }, { additionalProperties: false }),
  commands: () => [{
    name: 'robot say',
    summary: 'Say something like a robot',
    usage: 'lia robot say TEXT',
    async run({ positionals }, io) { io.stdout.write(positionals.join(' ').toUpperCase() + '\\n'); return 0; },
  }],
  async setup(app, ctx) {
    ctx.hooks.extensions.get('voices').register({ name: ctx.options.voice });
    app.get('/api/robot/missing', { config: { scope: 'models:read' } }, async () => { throw Errors.notFound('no such robot'); });
  },
});
`,
);

/** Throws errors made by another copy of the package (the transpiled one under dist/). */
const OTHER_COPY = esmPackage(
  'lia-plugin-other-copy',
  `import { definePlugin } from 'lia/plugin';
import { Errors } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'dist/core/index.js')).href)};
export default definePlugin({
  name: 'other-copy',
  apiVersion: 2,
  description: 'Errors from a second copy of lia',
  async setup(app) {
    app.get('/api/other/busy', { config: { scope: 'models:read' } }, async () => { throw Errors.unavailable('busy', { headers: { 'Retry-After': '7' } }); });
    app.get('/v1/other/gone', { config: { scope: 'models:read' } }, async () => { throw Errors.modelNotFound("model 'x' not found", { param: 'model' }); });
  },
});
`,
);

const OLD_API = esmPackage(
  'lia-plugin-old',
  `import { definePlugin } from 'lia/plugin';
export default definePlugin({ name: 'old', apiVersion: 0, description: 'Written for an older LIA', async setup() {} });
`,
);

/** Runs `lia` in this process with a configuration file; returns the exit code and output. */
async function lia(argv: string[], configFile: string): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (c: Buffer) => (out += c.toString()));
  stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await main(argv, { stdout, stderr, env: { ...process.env, LIA_CONFIG: configFile, LIA_LOG_LEVEL: 'silent' } });
  return { code, out, err };
}

t.test('ESM-only packages load by name, offer and consume a hook, and keep error statuses', async (t) => {
  const dir = await project({ 'lia-plugin-voices': VOICES, 'lia-plugin-robot': ROBOT, 'lia-plugin-other-copy': OTHER_COPY });
  const config = path.join(dir, 'lia.config.yaml');
  await writeFile(config, 'plugins: {}\n');
  // startTestAppliance reads no config file; the modules resolve from the config's folder, so
  // name them by path into that folder's node_modules as the loader would find them.
  const app = await startTestAppliance({
    plugins: {
      ...RUNTIME_ONLY,
      voices: { module: path.join(dir, 'node_modules/lia-plugin-voices/index.js') },
      robot: { module: path.join(dir, 'node_modules/lia-plugin-robot/index.js'), options: { voice: 'beep' } },
      'other-copy': { module: path.join(dir, 'node_modules/lia-plugin-other-copy/index.js') },
    },
  });
  t.teardown(app.close);
  t.same(await (await app.fetch('/api/voices')).json(), { voices: ['beep'] }, 'the consumer registered into the provider’s hook');
  const missing = await app.fetch('/api/robot/missing');
  t.equal(missing.status, 404);
  t.same(await missing.json(), { error: 'no such robot' });
  const busy = await app.fetch('/api/other/busy');
  t.equal(busy.status, 503, 'an error from another copy of the package keeps its status');
  t.equal(busy.headers.get('retry-after'), '7', 'and its headers');
  const gone = await app.fetch('/v1/other/gone');
  t.equal(gone.status, 404);
  t.same(await gone.json(), { error: "model 'x' not found" }, 'no OpenAI surface enabled: the default shape');
});

t.test('the loader resolves packages with ESM rules from the config’s folder', async (t) => {
  const dir = await project({ 'lia-plugin-voices': VOICES, 'lia-plugin-robot': ROBOT });
  const file = path.join(dir, 'lia.config.yaml');
  const off = Object.keys(RUNTIME_ONLY)
    .map((k) => `  ${k}: false`)
    .join('\n');
  await writeFile(file, `logLevel: silent\nplugins:\n${off}\n  voices: { module: lia-plugin-voices }\n  robot: { module: lia-plugin-robot }\n`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-plugins-data-'));
  const config = await loadConfig({ configFile: file, env: {}, flags: { host: '127.0.0.1', port: '0', dataDir } });
  const appliance = await startAppliance(config, { console: () => undefined, logDestination: null, env: {} });
  t.teardown(() => appliance.close());
  t.ok(
    appliance.plugins.some((p) => p.spec.name === 'robot' && p.origin === 'lia-plugin-robot'),
    'loaded by package name',
  );
  t.ok(appliance.hooks.extensions.names().includes('voices'));
});

t.test('a plugin’s CLI commands exist only while it is enabled', async (t) => {
  const dir = await project({ 'lia-plugin-voices': VOICES, 'lia-plugin-robot': ROBOT });
  const on = path.join(dir, 'on.yaml');
  await writeFile(on, 'plugins:\n  voices: { module: lia-plugin-voices }\n  robot: { module: lia-plugin-robot }\n');
  const help = await lia(['--help'], on);
  t.equal(help.code, 0);
  t.match(help.out, /robot say\s+Say something like a robot/);
  t.match(help.out, /\n {2}pull\s/, 'built-in commands are listed');
  const said = await lia(['robot', 'say', 'hello', 'there'], on);
  t.same([said.code, said.out], [0, 'HELLO THERE\n'], 'the command runs');

  const off = path.join(dir, 'off.yaml');
  await writeFile(off, 'plugins:\n  model-store: false\n  engine: false\n  api-openai: false\n');
  const fewer = await lia(['--help'], off);
  t.notMatch(fewer.out, /robot say/, 'a plugin not in the config adds nothing');
  t.notMatch(fewer.out, /\n {2}pull\s/, 'a disabled built-in plugin’s commands disappear');
  t.match(fewer.out, /\n {2}key show\s/);
  const unknown = await lia(['pull', 'x'], off);
  t.equal(unknown.code, 2);
  t.match(unknown.err, /unknown command "pull"/);
});

t.test('configurations that cannot run stop with exit 2 and say what to do', async (t) => {
  const dir = await project({ 'lia-plugin-old': OLD_API, 'lia-plugin-voices': VOICES, 'lia-plugin-robot': ROBOT });
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-plugins-data-'));
  const serve = (file: string) => lia(['serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir], file);

  const old = path.join(dir, 'old.yaml');
  await writeFile(old, 'plugins:\n  old: { module: lia-plugin-old }\n');
  const r1 = await serve(old);
  t.equal(r1.code, 2);
  t.match(r1.err, /plugin "old" was written for plugin API version 0, and this LIA implements version 2/);

  const noTls = path.join(dir, 'no-tls.yaml');
  await writeFile(
    noTls,
    `plugins:\n${Object.keys(RUNTIME_ONLY)
      .map((k) => `  ${k}: false`)
      .join('\n')}\n  pki-local-ca: false\n`,
  );
  const r2 = await serve(noTls);
  t.equal(r2.code, 2, 'no TLS provider is a configuration error, not a crash');
  t.match(r2.err, /no enabled plugin provides TLS.*enable "pki-local-ca"/);
  t.notMatch(r2.err, /\n\s+at /, 'no stack trace');

  const misordered = path.join(dir, 'misordered.yaml');
  await writeFile(misordered, 'plugins:\n  robot: { module: lia-plugin-robot }\n  voices: { module: lia-plugin-voices }\n');
  const r3 = await serve(misordered);
  t.equal(r3.code, 2);
  t.match(r3.err, /dependency 'voices' of plugin 'robot' is not registered.*list the plugin it depends on before it/);

  const missing = path.join(dir, 'missing.yaml');
  await writeFile(missing, 'plugins:\n  robot: { module: lia-plugin-robot }\n');
  const r4 = await serve(missing);
  t.equal(r4.code, 2);
  t.match(r4.err, /plugin "robot" needs plugin "voices", which is not enabled/);
});
