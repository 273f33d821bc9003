/**
 * An appliance killed outright (SIGKILL: no shutdown runs) leaves nothing behind: the llama-server
 * of its loaded model dies with it (the kernel's parent-death signal), and the model's private
 * temporary folder is removed by the next appliance that starts.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Agent, fetch } from 'undici';
import { requireLlamaServer } from '../helpers/engines.js';
import { ROOT } from '../helpers/fixtures.js';
import { createModel } from '../helpers/models.js';
import { waitFor } from '../helpers/wait.js';

requireLlamaServer();
const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-orphans-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const tmp = path.join(dir, 'tmp');
await mkdir(tmp);

const CONFIG =
  'logLevel: warn\nbackends: { gguf: llama-server }\nplugins: { host-network: false, host-gpu: false, host-services: false, backend-transformers: false, webui: false, console: false }\n';

/** `lia serve` in its own process, with `TMPDIR` in this test's folder. */
async function serve(name: string) {
  const cwd = path.join(dir, name);
  await mkdir(cwd);
  await writeFile(path.join(cwd, 'lia.config.yaml'), CONFIG);
  const dataDir = path.join(cwd, 'data');
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'lia.js'), 'serve', '--host', '127.0.0.1', '--port', '0', '--data-dir', dataDir], {
    cwd,
    env: { ...process.env, TMPDIR: tmp },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const port = await waitFor('the banner', () => /https:\/\/127\.0\.0\.1:(\d+)/.exec(out)?.[1], { timeoutMs: 60_000 });
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const ca = await readFile(path.join(dataDir, 'pki', 'root.crt'), 'utf8');
  const dispatcher = new Agent({ connect: { ca } });
  t.teardown(() => dispatcher.close());
  const appFetch = (p: string, init: Parameters<typeof fetch>[1] = {}) =>
    fetch(`https://localhost:${port}${p}`, { ...init, headers: { authorization: `Bearer ${key}`, ...(init.headers as object) }, dispatcher });
  return { child, fetch: appFetch };
}

const children = (pid: number) =>
  execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes('llama-server'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test('a SIGKILLed appliance takes its llama-server along; the next start removes its temporary folder', async (t) => {
  const first = await serve('first');
  await createModel(first, 'stories', 'gguf/stories260K.gguf');
  const res = await first.fetch('/api/generate', {
    method: 'POST',
    body: JSON.stringify({ model: 'stories', prompt: 'Hi', stream: false, options: { num_predict: 1 } }),
  });
  t.equal(res.status, 200);
  await res.arrayBuffer();
  const [server] = children(first.child.pid!);
  t.ok(server, 'the model runs in a llama-server child');
  const folders = (await readdir(tmp)).filter((n) => n.startsWith(`lia-slots-${first.child.pid}-`));
  t.equal(folders.length, 1, 'its slot folder is named after the appliance');

  first.child.kill('SIGKILL');
  await waitFor('the llama-server to die with its appliance', () => !alive(server!), { timeoutMs: 10_000 });
  t.notOk(alive(server!), 'no llama-server lives on with parent 1');
  t.ok(existsSync(path.join(tmp, folders[0]!)), 'the folder outlived the killed appliance');

  await serve('second');
  await waitFor('the stale folder to go', () => !existsSync(path.join(tmp, folders[0]!)), { timeoutMs: 30_000 });
  t.notOk(existsSync(path.join(tmp, folders[0]!)), 'the next appliance removed it');
});
