/**
 * The systemd service manager through the real API. systemd cannot run as PID 1 here, so
 * `systemctl` and `journalctl` are scripts that replay recorded outputs (systemd 252, see
 * test/fixtures/host/README.md) and record their argv: the test checks both what the user sees
 * and that the tools were called with fixed argument arrays and allow-listed unit names.
 */
import t from 'tap';
import { HOST_ONLY } from '../helpers/plugin-sets.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { waitFor } from '../helpers/wait.js';
import { fakeTool } from './fake-tool.js';

/** The interface's six services, in the start order of the shipped configuration. */
const SERVICE_NAMES = ['svc-inference', 'svc-webui', 'svc-proxy', 'svc-gpu-monitor', 'svc-system-api', 'svc-certs'];

t.test('systemd manager', async (t) => {
  const systemctl = await fakeTool('systemctl', {
    byArg: {
      show: { stdout: 'systemd/systemctl-show-six.txt' },
      'svc-webui.service': { stderr: 'systemd/systemctl-access-denied.stderr', exit: 1 },
      'svc-certs.service': { stderr: 'systemd/systemctl-restart-no-pid1.stderr', exit: 1 },
      'svc-gpu-monitor.service': { sleep: 30 },
    },
  });
  const journalctl = await fakeTool('journalctl', {
    byArg: { 'svc-webui.service': { stderr: 'systemd/journalctl-error.stderr', exit: 1 } },
    stdout: 'systemd/journalctl-json-svc-inference.txt',
  });
  const app = await startTestAppliance({
    listen: false,
    plugins: {
      ...HOST_ONLY,
      'host-services': { options: { manager: 'systemd', systemctl: systemctl.path, journalctl: journalctl.path, timeoutMs: 1000 } },
    },
  });
  t.teardown(() => app.close());
  const post = (p: string, body?: unknown) =>
    app.fetch(p, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  t.test('GET /system/services reads the six units with one systemctl show', async (t) => {
    const before = (await systemctl.calls()).length;
    const res = await app.fetch('/system/services');
    t.equal(res.status, 200);
    const body = (await res.json()) as {
      manager: string;
      services: { name: string; state: string; sub_state: string; main_pid: number | null; enabled: boolean; since: string | null }[];
    };
    t.equal(body.manager, 'systemd');
    t.same(
      body.services.map((s) => s.name),
      SERVICE_NAMES,
    );
    t.match(body.services[0], { name: 'svc-inference', state: 'active', sub_state: 'running', main_pid: 48213, enabled: true });
    t.match(body.services[3], { name: 'svc-gpu-monitor', state: 'failed' });
    t.match(body.services[5], { name: 'svc-certs', state: 'inactive', sub_state: 'not-found', since: null });
    const calls = (await systemctl.calls()).slice(before);
    t.equal(calls.length, 1);
    t.same(calls[0], [
      'show',
      '--no-pager',
      '--timestamp=unix',
      '--property=Id,Description,LoadState,ActiveState,SubState,MainPID,StateChangeTimestamp,UnitFileState',
      '--',
      ...SERVICE_NAMES.map((n) => `${n}.service`),
    ]);
  });

  t.test('an action is queued with --no-block and answered 202', async (t) => {
    const res = await post('/system/services/svc-inference/', { action: 'restart' });
    t.equal(res.status, 202);
    t.equal(res.headers.get('location'), '/system/services');
    t.match(await res.json(), { service: 'svc-inference', action: 'restart', status: 'queued', manager: 'systemd' });
    t.same((await systemctl.calls()).at(-1), ['--no-block', '--no-ask-password', 'restart', '--', 'svc-inference.service']);
  });

  t.test('restarting the API itself answers first and runs systemctl after', async (t) => {
    const earlier = (await systemctl.calls()).length;
    const res = await post('/system/services/svc-system-api/restart');
    t.equal(res.status, 202);
    await res.text();
    const call = await waitFor('systemctl to be run after the answer', async () =>
      (await systemctl.calls()).slice(earlier).find((c) => c.includes('restart') && c.includes('svc-system-api.service')),
    );
    t.same(call, ['--no-block', '--no-ask-password', 'restart', '--', 'svc-system-api.service']);
  });

  t.test('systemctl failures reach the user as clear errors', async (t) => {
    const denied = await post('/system/services/svc-webui?action=stop');
    t.equal(denied.status, 403);
    t.match(await denied.json(), { error: /Access denied.*polkit/ });
    const noSystemd = await post('/system/services/svc-certs/start');
    t.equal(noSystemd.status, 502);
    t.match(await noSystemd.json(), { error: /System has not been booted with systemd/ });
    const hung = await post('/system/services/svc-gpu-monitor/restart');
    t.equal(hung.status, 504);
    t.match(await hung.json(), { error: /did not answer within 1000 ms/ });
  });

  t.test('logs come from journalctl -u UNIT -n N -o json', async (t) => {
    const res = await app.fetch('/system/logs?service=svc-inference&lines=5');
    t.equal(res.status, 200);
    const body = (await res.json()) as { service: string; source: string; lines: { timestamp: string; priority: number; message: string }[] };
    t.equal(body.source, 'journal');
    t.equal(body.lines.length, 5);
    t.equal(body.lines.at(-1)?.message, 'model unloaded after keep_alive 5m');
    t.same((await journalctl.calls()).at(-1), ['-q', '--no-pager', '-o', 'json', '-n', '5', '--output-fields=MESSAGE,PRIORITY', '-u', 'svc-inference.service']);
    const clamped = await app.fetch('/system/logs?service=svc-inference&lines=999999');
    t.equal(clamped.status, 200);
    t.equal((await journalctl.calls()).at(-1)?.[5], '10000', 'lines clamped to 10000');
    const failing = await app.fetch('/system/logs?service=svc-webui');
    t.equal(failing.status, 502);
    t.match(await failing.json(), { error: /journalctl failed \(exit 1\): Failed to open files/ });
  });
});

t.test('systemctl that cannot reach systemd makes /system/services a 502, not a crash', async (t) => {
  const systemctl = await fakeTool('systemctl', { stderr: 'systemd/systemctl-show-no-pid1.stderr', exit: 1 });
  const app = await startTestAppliance({
    listen: false,
    plugins: { ...HOST_ONLY, 'host-services': { options: { manager: 'systemd', systemctl: systemctl.path } } },
  });
  t.teardown(() => app.close());
  const res = await app.fetch('/system/services');
  t.equal(res.status, 502);
  t.match(await res.json(), { error: /systemctl show failed \(exit 1\): System has not been booted with systemd/ });
  t.equal((await app.fetch('/system/status')).status, 200, 'the rest of the API still answers');
});
