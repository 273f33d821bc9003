/**
 * `/system/network` and the host name change, end to end: validation, the new name persisted,
 * re-advertised over mDNS (checked with a real mDNS client on the wire) and carried by the TLS
 * certificate the server presents right after, without a restart. Under systemd the name goes
 * through hostnamectl (replayed: recorded real failure output, and a script that records argv).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import multicastDns, { type MdnsRecord } from 'multicast-dns';
import t from 'tap';
import type { PluginEntry } from '../../core/config/schema.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { fakeTool } from './fake-tool.js';

const HOST_ONLY: Record<string, PluginEntry> = {
  'model-store': false,
  'backend-llama-cpp': false,
  'backend-transformers': false,
  engine: false,
  gguf: false,
  'backend-llama-server': false,
  'api-openai': false,
  'api-anthropic': false,
};

/** Asks the network and collects every record answered within `ms`. */
async function mdnsAsk(name: string, type: string, ms = 1200): Promise<MdnsRecord[]> {
  const client = multicastDns({ loopback: true, reuseAddr: true });
  const records: MdnsRecord[] = [];
  client.on('response', (packet) => records.push(...packet.answers, ...packet.additionals));
  client.query({ questions: [{ name, type }] });
  const again = setTimeout(() => client.query({ questions: [{ name, type }] }), 400);
  await new Promise((r) => setTimeout(r, ms));
  clearTimeout(again);
  await new Promise<void>((r) => client.destroy(() => r()));
  return records;
}

/** The SAN of the certificate the server presents for `servername`, verified against the CA. */
async function servedSan(app: TestAppliance, servername: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: app.port, servername, ca: app.ca }, () => {
      const san = socket.getPeerCertificate().subjectaltname ?? '';
      socket.end();
      resolve(san);
    });
    socket.on('error', reject);
  });
}

const post = (app: TestAppliance, query: string, body?: unknown) =>
  app.fetch(`/system/network/hostname${query}`, {
    method: 'POST',
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: { 'content-type': 'application/json' },
  });

t.test('host name, interfaces, mDNS and certificate', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-net-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const app = await startTestAppliance({ dataDir, plugins: { ...HOST_ONLY, 'host-network': { options: { mdns: 'embedded' } } } });
  let closed = false;
  t.teardown(() => (closed ? undefined : app.close()));
  const name = `lia-t${process.pid}`;

  t.test('GET /system/network', async (t) => {
    const res = await app.fetch('/system/network');
    t.equal(res.status, 200);
    const body = (await res.json()) as {
      hostname: string;
      interfaces: { name: string; mac: string | null; addresses: { address: string; family: string; prefix: number; internal: boolean }[] }[];
      mdns: Record<string, unknown>;
    };
    t.equal(body.hostname, app.hooks.extensions.get('network').hostname());
    const lo = body.interfaces.find((i) => i.name === 'lo');
    t.match(lo, { mac: null });
    t.match(lo?.addresses, [{ address: '127.0.0.1', family: 'IPv4', prefix: 8, internal: true }]);
    const host = Object.entries(os.networkInterfaces()).find(([, l]) => l?.some((a) => !a.internal));
    if (host)
      t.ok(
        body.interfaces.some((i) => i.name === host[0] && i.mac === host[1]![0]!.mac),
        'the MAC of a real interface',
      );
    t.match(body.mdns, { enabled: true, responder: 'embedded', services: [{ type: '_https._tcp', port: app.port }] });
  });

  t.test('invalid names are 400 with the rule', async (t) => {
    for (const [q, message] of [
      ['', /missing "hostname"/],
      ['?hostname=', /missing "hostname"/],
      ['?hostname=-bad', /not valid/],
      ['?hostname=bad-', /not valid/],
      ['?hostname=has%20space', /not valid/],
      ['?hostname=under_score', /not valid/],
      ['?hostname=a.b', /single label/],
      ['?hostname=box.local', /without ".local"/],
      [`?hostname=${'x'.repeat(64)}`, /longer than 63/],
      ['?hostname=%C3%BCmlaut', /not valid/],
    ] as const) {
      const res = await post(app, q);
      t.equal(res.status, 400, q);
      t.match(await res.json(), { error: message });
    }
    const twice = await post(app, '?hostname=one', { hostname: 'two' });
    t.equal(twice.status, 400);
    t.equal((await app.fetch('/system/network/hostname?hostname=x', { method: 'POST', auth: false })).status, 401);
  });

  t.test('a new name is applied, advertised and certified without a restart', async (t) => {
    const previous = app.hooks.extensions.get('network').hostname();
    const res = await post(app, `?hostname=${name.toUpperCase()}`);
    t.equal(res.status, 200);
    const body = (await res.json()) as {
      hostname: string;
      previous: string;
      mdns: { hostname: string; state: string };
      certificate: { reissued: boolean; covers_hostname: boolean };
    };
    t.equal(body.hostname, name, 'lower-cased');
    t.equal(body.previous, previous);
    t.match(body.mdns, { hostname: `${name}.local`, state: 'announced' });
    t.same(body.certificate, { reissued: true, covers_hostname: true });

    t.match(await servedSan(app, `${name}.local`), new RegExp(`DNS:${name}\\.local`), 'the served certificate carries the new name');
    t.equal(((await (await app.fetch('/system/status')).json()) as { hostname: string }).hostname, name);
    t.equal((await readFile(path.join(dataDir, 'network', 'hostname'), 'utf8')).trim(), name, 'persisted');

    const ptr = await mdnsAsk('_https._tcp.local', 'PTR');
    const srv = ptr.find((r) => r.type === 'SRV' && r.name === `LIA on ${name}._https._tcp.local`);
    t.ok(srv, 'the _https._tcp instance is advertised under the new name');
    t.match(srv?.data, { port: app.port, target: `${name}.local` });
    const a = await mdnsAsk(`${name}.local`, 'A');
    const mine = Object.values(os.networkInterfaces())
      .flat()
      .filter((x) => x && !x.internal && x.family === 'IPv4')
      .map((x) => x!.address);
    t.ok(
      a.some((r) => r.type === 'A' && r.name === `${name}.local` && mine.includes(r.data as string)),
      `${name}.local resolves to this host`,
    );
  });

  t.test('renaming again retires the old mDNS name', async (t) => {
    const res = await post(app, '', { hostname: `${name}-b` });
    t.equal(res.status, 200);
    t.ok(
      (await mdnsAsk(`${name}-b.local`, 'A')).some((r) => r.name === `${name}-b.local` && r.ttl! > 0),
      'the new name answers',
    );
    t.notOk(
      (await mdnsAsk(`${name}.local`, 'A')).some((r) => r.name === `${name}.local` && r.ttl! > 0),
      'the old name no longer does',
    );
  });

  t.test('the name survives a restart', async (t) => {
    await app.close();
    closed = true;
    const again = await startTestAppliance({ dataDir, plugins: { ...HOST_ONLY, 'host-network': { options: { mdns: 'off' } } } });
    t.teardown(() => again.close());
    t.equal(((await (await again.fetch('/system/network')).json()) as { hostname: string }).hostname, `${name}-b`);
    t.match(await servedSan(again, `${name}-b.local`), new RegExp(`DNS:${name}-b\\.local`));
  });
});

t.test('under systemd the name goes through hostnamectl', async (t) => {
  const hostnamectl = await fakeTool('hostnamectl', {
    byArg: {
      'denied-box': { stderr: 'systemd/hostnamectl-access-denied.stderr', exit: 1 },
      'nosystemd-box': { stderr: 'systemd/hostnamectl-no-pid1.stderr', exit: 1 },
    },
  });
  const app = await startTestAppliance({
    plugins: { ...HOST_ONLY, 'host-network': { options: { mdns: 'off', hostnameMode: 'system', hostnamectl: hostnamectl.path } } },
  });
  t.teardown(() => app.close());
  const ok = await post(app, '?hostname=sys-box');
  t.equal(ok.status, 200);
  t.same((await hostnamectl.calls()).at(-1), ['hostname', 'sys-box']);
  t.equal(app.hooks.extensions.get('network').hostname(), 'sys-box');
  const denied = await post(app, '?hostname=denied-box');
  t.equal(denied.status, 403);
  t.match(await denied.json(), { error: /Access denied.*polkit/ });
  const nosystemd = await post(app, '?hostname=nosystemd-box');
  t.equal(nosystemd.status, 502);
  t.match(await nosystemd.json(), { error: /hostnamectl failed: System has not been booted with systemd/ });
  t.equal(app.hooks.extensions.get('network').hostname(), 'sys-box', 'a refused name is not taken');
});
