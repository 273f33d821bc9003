/**
 * Boot to the first `GET /health` 200: `lia serve` of this checkout against `lia serve` of another
 * checkout (the anchor: an earlier commit, built, with `node_modules`), in one run, alternating,
 * each with its own data directory made on a warm-up boot (so no CA is generated in the timed
 * boots). Every plugin of the default configuration is enabled, mDNS off.
 *
 *   git worktree add /tmp/lia-anchor <commit> && (cd /tmp/lia-anchor && npm install && npm run build)
 *   node --conditions=lia-source --import tsx bench/plugins/boot.ts /tmp/lia-anchor [rounds=10]
 *
 * Prints the median boot time of each side, their ratio, and the ratio of the two halves of this
 * checkout's own rounds (the run-to-run spread to read the ratio against).
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Agent, fetch } from 'undici';
import { freePort } from '../lib/appliance-process.js';
import { median } from '../lib/stats.js';

const ROOT = path.resolve(import.meta.dirname, '..', '..');
const anchor = process.argv[2];
const rounds = Number(process.argv[3] ?? 10);
if (!anchor) {
  console.error('usage: node --conditions=lia-source --import tsx bench/plugins/boot.ts ANCHOR_CHECKOUT [rounds]');
  process.exit(2);
}

const insecure = new Agent({ connect: { rejectUnauthorized: false } });

/** Starts `lia serve` from `root`, returns ms until /health answers 200, then stops it. */
async function boot(root: string, dir: string): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [path.join(root, 'bin', 'lia.js'), 'serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', path.join(dir, 'data')],
    {
      cwd: dir,
      env: { ...process.env, LIA_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${root}: lia serve exited with ${child.exitCode}`);
      const ok = await fetch(`https://127.0.0.1:${port}/health`, { dispatcher: insecure })
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

async function side(root: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-boot-'));
  await writeFile(path.join(dir, 'lia.config.yaml'), 'plugins:\n  host-network:\n    options: { mdns: "off" }\n');
  await boot(root, dir); // warm-up: creates the CA, the key and the store; fills the page cache
  return dir;
}

const here = await side(ROOT);
const there = await side(anchor);
const mine: number[] = [];
const theirs: number[] = [];
for (let i = 0; i < rounds; i++) {
  // Alternate which side goes first so neither always follows the other's shutdown.
  if (i % 2 === 0) {
    mine.push(await boot(ROOT, here));
    theirs.push(await boot(anchor, there));
  } else {
    theirs.push(await boot(anchor, there));
    mine.push(await boot(ROOT, here));
  }
}
await insecure.close();
const half = Math.floor(rounds / 2);
const fmt = (ms: number): string => `${ms.toFixed(0)} ms`;
console.log(`boot to /health 200, ${rounds} rounds each, ${os.cpus().length} CPUs, ${os.cpus()[0]?.model ?? ''}`);
console.log(`  this checkout   median ${fmt(median(mine))}  (${mine.map((m) => m.toFixed(0)).join(' ')})`);
console.log(`  anchor          median ${fmt(median(theirs))}  (${theirs.map((m) => m.toFixed(0)).join(' ')})`);
console.log(`  ratio this/anchor ${(median(mine) / median(theirs)).toFixed(3)}`);
console.log(`  spread: this checkout's first/second half ${(median(mine.slice(0, half)) / median(mine.slice(half))).toFixed(3)}`);
