/**
 * Pull throughput benchmark: `POST /api/pull` of `bench-random-135m-q4_0.gguf` (71 MB) from a
 * local registry (Debian's docker-registry on loopback), against `curl` downloading the same blob
 * from the same registry in the same run. The pull includes the manifest, the small layers, the
 * SHA-256 check and the rename into the store; curl only writes the file. The appliance runs as
 * its own `lia serve` process, as users run it, and the pull is timed from the request to the
 * answer of `"stream": false` by a client as light as curl (undici's `request`), on a connection
 * it already has open (see bench/lib/connections.ts). Runs alternate so machine noise hits both
 * alike; the figures are medians, the ratio the median of the ratios within each run. Goal: ratio >= 0.9.
 *
 * Run: `node --conditions=lia-source --import tsx bench/pull/pull.bench.ts [--runs N]` (default 7 runs each).
 *
 * @module
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { countConnections, settle } from '../lib/connections.js';
import { median } from '../lib/stats.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { createModel, fileDigest } from '../../test/helpers/models.js';
import { startTestRegistry } from '../../test/helpers/registry.js';
import { STORE_ONLY } from '../../test/model-store/setup.js';

const MODEL = 'gguf/bench-random-135m-q4_0.gguf';

/** Runs the benchmark; `runs` timed pulls and curls after one warm-up each. Defaults to 7. */
export async function run(runs = 7): Promise<{ pullMBps: number; curlMBps: number; ratio: number; bytes: number; connects: number }> {
  const file = fixture(MODEL);
  const bytes = (await stat(file)).size;
  const digest = await fileDigest(file);
  const reg = await startTestRegistry();
  const app = await startApplianceProcess({ plugins: STORE_ONLY });
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'lia-bench-pull-'));
  try {
    await createModel(app, 'bench', MODEL);
    const name = `${reg.host}/library/bench:latest`;
    const json = async (method: string, p: string, body: unknown) => {
      const res = await app.fetch(p, { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const text = await res.text();
      if (res.status !== 200) throw new Error(`${p}: ${res.status} ${text}`);
      return text;
    };
    await json('POST', '/api/copy', { source: 'bench', destination: name });
    await json('POST', '/api/push', { name, insecure: true, stream: false });
    await json('DELETE', '/api/delete', { name: 'bench' });
    const blobUrl = `${reg.url}/v2/library/bench/blobs/${digest}`;
    const pulls: number[] = [];
    const curls: number[] = [];
    const out = path.join(tmp, 'blob');
    // The pull goes over a connection the client already has open (see bench/lib/connections.ts).
    // A GET opens it, since undici closes a connection after a DELETE with a body.
    const connections = countConnections();
    const pull = async (): Promise<number> => {
      await (await request(`${app.url}/api/tags`, { dispatcher: app.dispatcher(), headers: { authorization: `Bearer ${app.key}` } })).body.text();
      await settle();
      connections.on = true;
      const t0 = performance.now();
      const res = await request(`${app.url}/api/pull`, {
        method: 'POST',
        dispatcher: app.dispatcher(),
        headers: { authorization: `Bearer ${app.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name, insecure: true, stream: false }),
      });
      const answer = await res.body.text();
      const secs = (performance.now() - t0) / 1000;
      connections.on = false;
      if (res.statusCode !== 200) throw new Error(`pull: ${res.statusCode} ${answer}`);
      return secs;
    };
    const curl = (): number => Number(execFileSync('curl', ['-sS', '-o', out, '-w', '%{time_total}', blobUrl], { encoding: 'utf8' }));
    for (let i = 0; i < runs + 1; i++) {
      // Both sides start from the same state: the previous files deleted and everything written
      // back (so neither pays for the other's disk flush), and they take turns going first.
      await json('DELETE', '/api/delete', { name }).catch(() => undefined);
      await rm(out, { force: true });
      execFileSync('sync');
      let pullSecs: number;
      let curlSecs: number;
      if (i % 2 === 0) {
        pullSecs = await pull();
        execFileSync('sync');
        curlSecs = curl();
      } else {
        curlSecs = curl();
        execFileSync('sync');
        pullSecs = await pull();
      }
      if (i === 0) continue; // warm-up: page cache, connections, lazy imports
      pulls.push(pullSecs);
      curls.push(curlSecs);
      if (process.env.BENCH_VERBOSE) console.error(`pull ${(pullSecs * 1000).toFixed(1)} ms  curl ${(curlSecs * 1000).toFixed(1)} ms`);
    }
    const pullMBps = bytes / 1e6 / median(pulls);
    const curlMBps = bytes / 1e6 / median(curls);
    connections.stop();
    const connects = Object.values(connections.opened).reduce((a, b) => a + b, 0);
    // The ratio is the median of the ratios within a run (a pull and a curl back to back), so a
    // machine that drifts between runs moves both sides alike.
    const ratio = median(pulls.map((p, i) => curls[i]! / p));
    return { pullMBps, curlMBps, ratio, bytes, connects };
  } finally {
    await app.close();
    await reg.close();
    await rm(tmp, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
  const r = await run(Number(values.runs));
  console.log(
    `pull: ${r.pullMBps.toFixed(0)} MB/s   curl: ${r.curlMBps.toFixed(0)} MB/s   ratio ${r.ratio.toFixed(2)} (goal >= 0.9; ${(r.bytes / 1e6).toFixed(0)} MB blob, medians, ratio of paired runs; ${r.connects} new connections in timed pulls)`,
  );
  console.log(JSON.stringify({ bench: 'pull', ...r }));
}
