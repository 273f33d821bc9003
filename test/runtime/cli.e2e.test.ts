/**
 * The `lia` command as an operator runs it: `lia serve` on a fresh data directory (banner, key
 * printed once, clean shutdown on SIGTERM), a bad config (exit 2 naming key and file), and the CA
 * commands.
 */
import { execFile, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const run = promisify(execFile);
const LIA = path.join(ROOT, 'bin', 'lia.js');

/** Starts `lia serve` and resolves with its banner once it is listening. */
function serve(cwd: string, env: NodeJS.ProcessEnv): Promise<{ child: ReturnType<typeof spawn>; banner: string }> {
  const child = spawn(process.execPath, [LIA, 'serve', '--host', '127.0.0.1', '--port', '0'], { cwd, env: { ...process.env, ...env } });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('Master key')) resolve({ child, banner: out });
    });
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('exit', (code) => reject(new Error(`lia serve exited ${code}: ${out}`)));
  });
}

function exited(child: ReturnType<typeof spawn>): Promise<number | null> {
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)));
}

const runtimeOnlyYaml = `logLevel: warn\nplugins:\n${Object.keys(RUNTIME_ONLY)
  .map((k) => `  ${k}: false`)
  .join('\n')}\n`;

t.test('lia serve: first boot says a key was created, never printing it; SIGTERM exits 0', async (t) => {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-'));
  const dataDir = path.join(cwd, 'data');
  await writeFile(path.join(cwd, 'lia.config.yaml'), runtimeOnlyYaml);
  const env = { LIA_DATA_DIR: dataDir };

  const first = await serve(cwd, env);
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
  t.match(first.banner, /Host name\s+\S+/);
  t.match(first.banner, /https:\/\/localhost:\d+/);
  t.match(first.banner, /https:\/\/127\.0\.0\.1:\d+/);
  t.match(first.banner, new RegExp(`Master key\\s+${dataDir}/keys/master.key`));
  t.match(
    first.banner,
    new RegExp(`New key\\s+created on this boot, ends in …${key.slice(-4)}: print it with "lia key show"`),
    'the boot that created the key says so, with its last characters',
  );
  t.notOk(first.banner.includes(key), 'but never prints the key (the banner goes to the journal under systemd)');
  const fp = new X509Certificate(await readFile(path.join(dataDir, 'pki', 'root.crt'))).fingerprint256;
  t.ok(first.banner.includes(fp), 'the banner carries the CA fingerprint');
  const port = /https:\/\/127\.0\.0\.1:(\d+)/.exec(first.banner)?.[1];

  const caFile = path.join(cwd, 'ca.crt');
  const exported = await run(process.execPath, [LIA, 'ca', 'export', '-o', caFile], { env: { ...process.env, ...env } });
  t.match(exported.stderr, new RegExp(fp));
  const fromUrl = await run(process.execPath, [LIA, 'ca', 'fingerprint', '--url', `https://127.0.0.1:${port}`]);
  t.equal(fromUrl.stdout.trim(), fp, '`lia ca fingerprint --url` reads the served CA');
  const local = await run(process.execPath, [LIA, 'ca', 'fingerprint'], { env: { ...process.env, ...env } });
  t.equal(local.stdout.trim(), fp);

  first.child.kill('SIGTERM');
  t.equal(await exited(first.child), 0, 'SIGTERM shuts down cleanly');

  const second = await serve(cwd, env);
  t.notMatch(second.banner, /New key/, 'a later boot does not mention a new key');
  t.ok(second.banner.includes(fp), 'and keeps the same CA');
  second.child.kill('SIGINT');
  t.equal(await exited(second.child), 0);
});

t.test('a bad config stops the start with exit code 2 naming the key and the file', async (t) => {
  const cwd = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-'));
  await writeFile(path.join(cwd, 'lia.config.yaml'), 'port: 8443\nhots: 0.0.0.0\n');
  const res = await run(process.execPath, [LIA, 'serve'], { cwd, env: { ...process.env, LIA_DATA_DIR: path.join(cwd, 'd') } }).catch(
    (e: { code: number; stderr: string }) => e,
  );
  t.equal((res as { code: number }).code, 2);
  t.match((res as { stderr: string }).stderr, /lia\.config\.yaml: unknown key "hots"/);

  await writeFile(path.join(cwd, 'lia.config.yaml'), `${runtimeOnlyYaml}  mystery: true\n`);
  const res2 = await run(process.execPath, [LIA, 'serve'], { cwd, env: { ...process.env, LIA_DATA_DIR: path.join(cwd, 'd') } }).catch(
    (e: { code: number; stderr: string }) => e,
  );
  t.equal((res2 as { code: number }).code, 2);
  t.match((res2 as { stderr: string }).stderr, /plugin "mystery" cannot be found/);

  const usage = await run(process.execPath, [LIA, 'nope']).catch((e: { code: number; stderr: string }) => e);
  t.equal((usage as { code: number }).code, 2);
  t.match((usage as { stderr: string }).stderr, /unknown command "nope"/);
});
