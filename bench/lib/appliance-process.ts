/**
 * Starts the appliance for a benchmark as users run it: its own `lia serve` process (the
 * transpiled dist/ when built), a fresh data directory and a config file, on a free loopback
 * port. Running it inside the benchmark's process would make the load generator and the server
 * share one event loop and inflate every latency.
 *
 * The returned object has the `url`, `key`, `ca` and `fetch` that `test/helpers/models.ts`
 * (`createModel`) needs.
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fetch, Headers, type Pool, type RequestInit, type Response } from 'undici';
import { keepAlivePool } from './connections.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');

export interface ApplianceProcess {
  url: string;
  port: number;
  key: string;
  ca: string;
  dataDir: string;
  pid: number;
  /** The connections to the appliance (a pool of up to 64; see `keepAlivePool`). */
  dispatcher(): Pool;
  fetch(pathname: string, init?: RequestInit & { auth?: boolean }): Promise<Response>;
  close(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Starts `lia serve` with `config` (merged over the defaults) and waits for its banner. `root` is
 * the checkout to run (this one by default; another, built, to compare against an earlier commit).
 */
export async function startApplianceProcess(config: Record<string, unknown> = {}, env: Record<string, string> = {}, root = ROOT): Promise<ApplianceProcess> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-bench-'));
  const dataDir = path.join(dir, 'data');
  const port = await freePort();
  await writeFile(path.join(dir, 'lia.config.json'), JSON.stringify({ logLevel: 'warn', ...config }));
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(root, 'bin', 'lia.js'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', dataDir],
    {
      cwd: dir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('Master key')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`lia serve exited ${code}: ${out}`)));
  });
  const key = (await readFile(path.join(dataDir, 'keys', 'master.key'), 'utf8')).trim();
  const ca = await readFile(path.join(dataDir, 'pki', 'root.crt'), 'utf8');
  const url = `https://localhost:${port}`;
  const agent = keepAlivePool(url, { connect: { ca } });
  return {
    url,
    port,
    key,
    ca,
    dataDir,
    pid: child.pid!,
    dispatcher: () => agent,
    fetch(pathname, init = {}) {
      const { auth = true, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (auth && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
      return fetch(url + pathname, { ...rest, headers, dispatcher: agent });
    },
    async close() {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      await agent.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
