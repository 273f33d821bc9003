/**
 * Starts Debian's real CNCF distribution registry (`/usr/bin/docker-registry`, package
 * `docker-registry`) on a free loopback port with a temporary storage folder, for pull/push
 * tests. Plain HTTP, so clients pull with `"insecure": true`. A missing binary fails loudly.
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** The registry binary. Defaults to Debian's `/usr/bin/docker-registry` (`LIA_TEST_REGISTRY_BIN` overrides). */
export const REGISTRY_BIN = process.env['LIA_TEST_REGISTRY_BIN'] ?? '/usr/bin/docker-registry';

/** A running test registry. */
export interface TestRegistry {
  /** `127.0.0.1:<port>`, the host part of model names. */
  host: string;
  url: string;
  port: number;
  /** The registry's storage folder (blobs under `docker/registry/v2/blobs`). */
  storage: string;
  /** The data file of a blob in the registry's storage (to corrupt it in fault tests). */
  blobFile(digest: string): string;
  close(): Promise<void>;
}

/** A free TCP port on 127.0.0.1. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/** Starts a registry; call `close()` in a teardown (it stops the process and removes its storage). */
export async function startTestRegistry(): Promise<TestRegistry> {
  if (!existsSync(REGISTRY_BIN)) {
    throw new Error(`the registry binary ${REGISTRY_BIN} is missing: install Debian's "docker-registry" package (apt-get install -y docker-registry)`);
  }
  const storage = await mkdtemp(path.join(os.tmpdir(), 'lia-registry-'));
  const port = await freePort();
  const config = path.join(storage, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: error',
      '  accesslog:',
      '    disabled: true',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${path.join(storage, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`docker-registry exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(`${url}/v2/`);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill();
      throw new Error(`docker-registry did not start on ${url} within 15 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host: `127.0.0.1:${port}`,
    url,
    port,
    storage,
    blobFile(digest) {
      const hex = digest.replace(/^sha256:/, '');
      return path.join(storage, 'data', 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
    },
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(storage, { recursive: true, force: true });
    },
  };
}
