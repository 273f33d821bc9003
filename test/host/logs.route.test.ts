/**
 * `GET /system/logs` in the embedded default: each service's recent lines from its ring buffer,
 * the `lines` and `service` rules, the per-service log file, history kept across a restart, and
 * rotation of the files.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { LogFiles } from '../../plugins/host-services/log-files.js';
import { HOST_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance } from '../helpers/appliance.js';

interface LogsBody {
  service: string;
  source: string;
  lines: { timestamp: string; priority: number; message: string }[];
}

t.test('logs of one service, with their rules, kept in a file and across a restart', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-logs-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const app = await startTestAppliance({ listen: false, dataDir, plugins: HOST_ONLY, env: { LIA_LOG_LEVEL: 'info' } });
  let closed = false;
  t.teardown(() => (closed ? undefined : app.close()));

  const res = await app.fetch('/system/logs?service=svc-gpu-monitor');
  t.equal(res.status, 200);
  const body = (await res.json()) as LogsBody;
  t.equal(body.service, 'svc-gpu-monitor');
  t.equal(body.source, 'embedded');
  const started = body.lines.find((l) => l.message === 'GPU monitor started');
  t.ok(started, 'the monitor logged its start');
  t.equal(started?.priority, 6, 'info is syslog priority 6');
  t.ok(Date.parse(started!.timestamp) > Date.now() - 120_000, 'an ISO timestamp of now');
  t.notOk(
    body.lines.some((l) => /management API/.test(l.message)),
    'lines of other services stay out',
  );

  // One more line per action, so the count is known.
  for (let i = 0; i < 3; i++) await app.fetch('/system/services/svc-gpu-monitor/restart', { method: 'POST' });
  const all = ((await (await app.fetch('/system/logs?service=svc-gpu-monitor&lines=10000')).json()) as LogsBody).lines;
  t.ok(all.length >= 7, `${all.length} lines`);
  const two = ((await (await app.fetch('/system/logs?service=svc-gpu-monitor&lines=2')).json()) as LogsBody).lines;
  t.same(two, all.slice(-2), 'lines=2 gives the last two, oldest first');
  t.equal(((await (await app.fetch('/system/logs?service=svc-gpu-monitor&lines=0')).json()) as LogsBody).lines.length, 1, '0 is clamped to 1');

  for (const [query, message] of [
    ['service=svc-gpu-monitor&lines=abc', /whole number/],
    ['service=svc-gpu-monitor&lines=-5', /whole number/],
    ['service=svc-gpu-monitor&lines=2.5', /whole number/],
    ['lines=10', /missing "service"/],
    ['service=ssh', /unknown service "ssh"/],
    ['service=svc-*', /unknown service/],
  ] as const) {
    const bad = await app.fetch(`/system/logs?${query}`);
    t.equal(bad.status, 400, query);
    t.match(await bad.json(), { error: message });
  }

  await app.close();
  closed = true;
  const file = await readFile(path.join(dataDir, 'logs', 'svc-gpu-monitor.log'), 'utf8');
  const fileLines = file
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { message: string });
  t.ok(
    fileLines.some((l) => l.message === 'GPU monitor started'),
    'the line is in the service file',
  );
  t.ok(
    fileLines.some((l) => /GPU monitor stopped/.test(l.message)),
    'up to the stop at shutdown',
  );

  const again = await startTestAppliance({ listen: false, dataDir, plugins: HOST_ONLY, env: { LIA_LOG_LEVEL: 'info' } });
  t.teardown(() => again.close());
  const history = ((await (await again.fetch('/system/logs?service=svc-gpu-monitor&lines=10000')).json()) as LogsBody).lines;
  t.ok(history.filter((l) => l.message === 'GPU monitor started').length >= 5, 'earlier runs are still there after a restart');
  t.ok(history.length > all.length, 'history first, then this run');
});

t.test('log files rotate at their size limit and keep N generations', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-rotate-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const files = new LogFiles({ dir, maxBytes: 4096, keep: 2 });
  await files.open(['svc-inference'], 100);
  for (let i = 0; i < 300; i++) {
    files.write('svc-inference', { timestamp: new Date(1_700_000_000_000 + i).toISOString(), priority: 6, message: `line ${i}` });
    if (i % 25 === 0) await files.flushed();
  }
  await files.flushed();
  const names = (await readdir(dir)).sort();
  t.same(names, ['svc-inference.log', 'svc-inference.log.1', 'svc-inference.log.2'], 'two rotated generations kept');
  for (const n of names) t.ok((await readFile(path.join(dir, n))).length <= 4096 + 2048, `${n} stays near the limit`);
  const reopened = await new LogFiles({ dir, maxBytes: 4096, keep: 2 }).open(['svc-inference'], 50);
  const lines = reopened.get('svc-inference')!;
  t.equal(lines.length, 50);
  t.equal(lines.at(-1)?.message, 'line 299', 'newest last');
  t.equal(lines[0]?.message, 'line 250', 'in order across files');
});
