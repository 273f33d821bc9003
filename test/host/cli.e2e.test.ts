/**
 * The management commands of `lia`, spawned as an operator runs them against a running
 * appliance (LIA_URL, LIA_API_KEY, LIA_CA_CERT): status, gpu, services, service actions, logs,
 * network and hostname.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import t from 'tap';
import { main } from '../../core/cli/main.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';

const run = promisify(execFile);
const LIA = path.join(ROOT, 'bin', 'lia.js');

t.test('lia management commands', async (t) => {
  const app = await startTestAppliance({
    env: { LIA_LOG_LEVEL: 'info' },
    plugins: {
      'model-store': false,
      'backend-llama-cpp': false,
      'backend-transformers': false,
      engine: false,
      gguf: false,
      'backend-llama-server': false,
      'api-openai': false,
      'api-anthropic': false,
      'host-network': { options: { mdns: 'off' } },
    },
  });
  t.teardown(() => app.close());
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-cli-host-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const caFile = path.join(dir, 'ca.crt');
  await writeFile(caFile, app.ca);
  // From source: a dev checkout's dist/ may predate these commands (CI builds it fresh).
  const env = { ...process.env, LIA_FROM_SOURCE: '1', LIA_URL: app.url, LIA_API_KEY: app.key, LIA_CA_CERT: caFile };
  /** Spawned as the operator runs it (a few, to keep the file fast). */
  const spawned = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    try {
      const r = await run(process.execPath, [LIA, ...args], { env, timeout: 30_000 });
      return { code: 0, stdout: r.stdout, stderr: r.stderr };
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string };
      return { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
  };
  /** The same entry point in this process (the spawned cases above cover the binary). */
  const lia = async (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    let stdout = '';
    let stderr = '';
    const sink = (add: (s: string) => void) => new Writable({ write: (c: Buffer, _e, cb) => (add(c.toString()), cb()) });
    const code = await main(args, { env, stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)) });
    return { code, stdout, stderr };
  };

  const status = await spawned('status');
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, new RegExp(`Host name\\s+${app.hooks.extensions.get('network').hostname()}`));
  t.match(status.stdout, /Version\s+v\d+\.\d+\.\d+/);
  t.match(status.stdout, /Model disk\s+\S+G used, \S+G free of \S+G/);

  const gpu = await lia('gpu', '--json');
  t.equal(gpu.code, 0);
  t.match(JSON.parse(gpu.stdout), { vendor: 'none', devices: [] });

  const services = await lia('services');
  t.equal(services.code, 0);
  t.match(services.stdout, /^SERVICE\s+STATE/);
  t.match(services.stdout, /svc-gpu-monitor\s+active\s+running/);
  t.equal(services.stdout.trim().split('\n').length, 7, 'a header and six services');

  const restart = await lia('service', 'restart', 'svc-gpu-monitor');
  t.equal(restart.code, 0, restart.stderr);
  t.equal(restart.stdout, 'svc-gpu-monitor: active\n');

  const refused = await spawned('service', 'stop', 'svc-system-api');
  t.equal(refused.code, 1);
  t.match(refused.stderr, /409 .*"force": true/);

  const unknown = await lia('service', 'start', 'svc-nope');
  t.equal(unknown.code, 1);
  t.match(unknown.stderr, /404 no such service/);

  const logs = await lia('logs', 'svc-gpu-monitor', '-n', '3');
  t.equal(logs.code, 0, logs.stderr);
  const lines = logs.stdout.trim().split('\n');
  t.equal(lines.length, 3);
  t.match(lines.at(-1), /^\d{4}-\d\d-\d\dT\S+Z info\s+GPU monitor started$/);

  const badLines = await lia('logs', 'svc-gpu-monitor', '-n', 'many');
  t.equal(badLines.code, 1);
  t.match(badLines.stderr, /400 .*whole number/);

  const network = await lia('network');
  t.equal(network.code, 0);
  t.match(network.stdout, /INTERFACE\s+MAC\s+ADDRESSES/);
  t.match(network.stdout, /lo\s+-\s+127\.0\.0\.1\/8/);

  const rename = await lia('hostname', 'cli-box');
  t.equal(rename.code, 0, rename.stderr);
  t.match(rename.stdout, /Host name is now cli-box .*certificate covers it/);
  const invalid = await lia('hostname', 'not_valid');
  t.equal(invalid.code, 1);
  t.match(invalid.stderr, /400 /);
});
