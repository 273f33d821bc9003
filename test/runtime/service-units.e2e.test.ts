/**
 * The per-service systemd units run `lia serve --service NAME`: the `svc-proxy` unit is the
 * appliance, every other unit attaches to it through the control socket and drives its role.
 * systemd cannot run here, so the test plays systemd's part: start the unit's command, send it
 * SIGTERM, watch its exit code.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { ROOT } from '../helpers/fixtures.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

function unit(service: string, dataDir: string) {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin', 'lia.js'), 'serve', '--service', service], {
    env: { ...process.env, LIA_DATA_DIR: dataDir },
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const saw = async (text: string): Promise<void> => {
    for (let i = 0; i < 200 && !out.includes(text); i++) await new Promise((r) => setTimeout(r, 50));
    if (!out.includes(text)) throw new Error(`never saw "${text}" in: ${out}`);
  };
  return { child, exited, saw, output: () => out };
}

t.test('a role unit starts its role, mirrors it, and stops it on SIGTERM', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  await app.hooks.services.stop('svc-webui');
  t.equal((await app.fetch('/ui/', { auth: false })).status, 503);

  const webui = unit('svc-webui', app.dataDir);
  await webui.saw('svc-webui: active');
  t.equal(app.hooks.services.get('svc-webui').state, 'active', 'starting the unit started the role');
  t.equal((await app.fetch('/ui/', { auth: false })).status, 200);

  webui.child.kill('SIGTERM');
  t.equal(await webui.exited, 0, 'systemctl stop: the unit exits 0');
  t.equal(app.hooks.services.get('svc-webui').state, 'inactive', 'and the role is stopped');
  t.match(webui.output(), /svc-webui: inactive \(dead\)/);
});

t.test('a role unit exits 1 when the appliance goes away, so systemd restarts it', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY, keepDataDir: true });
  const certs = unit('svc-certs', app.dataDir);
  await certs.saw('svc-certs: active');
  await app.close();
  t.equal(await certs.exited, 1);
  t.match(certs.output(), /the appliance went away/);
});

t.test('an unknown service is refused with exit code 2', async (t) => {
  const bad = unit('svc-nope', '/nonexistent');
  t.equal(await bad.exited, 2);
  t.match(bad.output(), /unknown service "svc-nope"/);
});
