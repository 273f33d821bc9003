/**
 * The shipped systemd files: every unit passes `systemd-analyze verify` without a warning about
 * it, carries the hardening a careful vendor ships, and the polkit rule grants the service user
 * exactly start/stop/restart of the six units (and the host name), nothing else.
 */
import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import vm from 'node:vm';
import t from 'tap';
import { ROOT } from '../helpers/fixtures.js';

/** The interface's six services, in the start order of the shipped configuration. */
const SERVICE_NAMES = ['svc-inference', 'svc-webui', 'svc-proxy', 'svc-gpu-monitor', 'svc-system-api', 'svc-certs'];

const run = promisify(execFile);
const UNITS_DIR = path.join(ROOT, 'systemd');

async function unitFiles(): Promise<string[]> {
  return (await readdir(UNITS_DIR)).filter((f) => f.endsWith('.service') || f.endsWith('.target')).sort();
}

t.test('there is one unit per service, a target that wants them all, and the device console', async (t) => {
  const files = await unitFiles();
  t.same(files, [...SERVICE_NAMES.map((n) => `${n}.service`), 'lia.target', 'lia-console.service'].sort());
  const target = await readFile(path.join(UNITS_DIR, 'lia.target'), 'utf8');
  for (const name of SERVICE_NAMES) t.match(target, new RegExp(`Wants=.*\\b${name}\\.service`), `lia.target wants ${name}`);
});

t.test('every unit is hardened', async (t) => {
  for (const name of SERVICE_NAMES) {
    const text = await readFile(path.join(UNITS_DIR, `${name}.service`), 'utf8');
    for (const line of [
      'User=lia',
      'NoNewPrivileges=yes',
      'ProtectSystem=strict',
      'ProtectHome=yes',
      'PrivateTmp=yes',
      'CapabilityBoundingSet=\n',
      'PartOf=lia.target',
      'WantedBy=lia.target',
    ]) {
      t.ok(text.includes(line), `${name}: ${line.trim()}`);
    }
    t.notMatch(text, /^User=root/m, `${name} does not run as root`);
    t.match(text, new RegExp(`^ExecStart=/usr/lib/lia/bin/lia serve --service ${name}$`, 'm'), `${name} runs its own role`);
  }
});

t.test('the device console takes tty1 from the login prompt, as user lia', async (t) => {
  const text = await readFile(path.join(UNITS_DIR, 'lia-console.service'), 'utf8');
  for (const line of ['TTYPath=/dev/tty1', 'StandardInput=tty', 'Conflicts=getty@tty1.service', 'User=lia', 'NoNewPrivileges=yes', 'ProtectSystem=strict']) {
    t.ok(text.includes(line), line);
  }
  t.match(text, /^ExecStart=\/usr\/lib\/lia\/bin\/lia console$/m);
  t.notMatch(text, /^PartOf=lia\.target/m, 'enabled on its own, not with the services');
});

t.test('systemd-analyze verify accepts every unit', async (t) => {
  // Verify in a scratch root: the real unit search path (for sysinit.target and friends) plus
  // the units and an executable at the ExecStart path, since verify checks that it exists.
  const root = await mkdtemp(path.join(os.tmpdir(), 'lia-verify-'));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  const system = path.join(root, 'usr/lib/systemd/system');
  await mkdir(system, { recursive: true });
  await cp('/usr/lib/systemd/system', system, {
    recursive: true,
    dereference: true,
    errorOnExist: false,
    filter: (src) => !src.includes('@') || src.endsWith('system'),
  }).catch(() => undefined);
  await mkdir(path.join(root, 'usr/lib/lia/bin'), { recursive: true });
  await writeFile(path.join(root, 'usr/lib/lia/bin/lia'), '#!/bin/sh\n');
  await chmod(path.join(root, 'usr/lib/lia/bin/lia'), 0o755);
  const files = await unitFiles();
  for (const f of files) await copyFile(path.join(UNITS_DIR, f), path.join(system, f));
  let stderr = '';
  let code = 0;
  try {
    const r = await run('systemd-analyze', ['verify', '--man=no', `--root=${root}`, ...files], { timeout: 30_000 });
    stderr = r.stderr;
  } catch (err) {
    const e = err as { code?: number | string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('systemd-analyze is missing: install the Debian "systemd" package');
    code = typeof e.code === 'number' ? e.code : 1;
    stderr = e.stderr ?? String(err);
  }
  const ours = stderr.split('\n').filter((l) => /svc-|lia\.target|lia-console/.test(l));
  t.equal(code, 0, `systemd-analyze verify exits 0\n${stderr}`);
  t.same(ours, [], 'no warning names one of our units');
});

interface FakeAction {
  id: string;
  lookup(key: string): string | undefined;
}

t.test('the polkit rule allows exactly the six units, three verbs, and the host name', async (t) => {
  const source = await readFile(path.join(UNITS_DIR, 'polkit-1/rules.d/50-lia-system-api.rules'), 'utf8');
  const rules: ((action: FakeAction, subject: { user: string }) => string)[] = [];
  const Result = { YES: 'yes', NO: 'no', NOT_HANDLED: 'not-handled', AUTH_ADMIN: 'auth_admin' };
  vm.runInNewContext(source, { polkit: { Result, addRule: (fn: (typeof rules)[number]) => rules.push(fn) } });
  t.equal(rules.length, 1);
  const decide = (user: string, id: string, unit?: string, verb?: string): string =>
    rules[0]!({ id, lookup: (k) => (k === 'unit' ? unit : k === 'verb' ? verb : undefined) }, { user });
  const manage = 'org.freedesktop.systemd1.manage-units';
  for (const name of SERVICE_NAMES) {
    for (const verb of ['start', 'stop', 'restart']) t.equal(decide('lia', manage, `${name}.service`, verb), 'yes', `${verb} ${name}`);
    t.equal(decide('lia', manage, `${name}.service`, 'enable'), 'not-handled', `no enable of ${name}`);
    t.equal(decide('nobody', manage, `${name}.service`, 'restart'), 'not-handled', `another user cannot touch ${name}`);
  }
  for (const other of ['ssh.service', 'avahi-daemon.service', 'lia.target', 'svc-inference.socket', 'svc-*.service']) {
    t.equal(decide('lia', manage, other, 'restart'), 'not-handled', `no restart of ${other}`);
  }
  t.equal(decide('lia', 'org.freedesktop.hostname1.set-static-hostname'), 'yes');
  t.equal(decide('lia', 'org.freedesktop.login1.reboot'), 'not-handled');
});
