/**
 * Publishing through avahi: when an avahi-daemon runs (its pid file names a live process), the
 * appliance writes a static service file for `_https._tcp` on the port it listens on instead of
 * starting its own responder, and removes the file when it stops. The daemon itself is not
 * started here (it would take over mDNS for every other test on the machine): a temp pid file
 * naming this process and a temp services folder stand in for /run and /etc.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { avahiRunning, serviceFileXml } from '../../plugins/host-network/mdns/avahi.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { waitFor } from '../helpers/wait.js';

t.test('a running avahi gets a service file with the real port, removed on stop', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-avahi-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const pidFile = path.join(dir, 'pid');
  await writeFile(pidFile, `${process.pid}\n`);
  const app = await startTestAppliance({
    plugins: {
      'model-store': false,
      'backend-llama-cpp': false,
      'backend-transformers': false,
      engine: false,
      gguf: false,
      'backend-llama-server': false,
      'api-openai': false,
      'api-anthropic': false,
      'host-network': { options: { mdns: 'auto', avahiPidFile: pidFile, avahiServicesDir: dir } },
    },
  });
  let closed = false;
  t.teardown(() => (closed ? undefined : app.close()));
  const file = path.join(dir, 'lia.service');
  await waitFor('the avahi service file', () => existsSync(file));
  const xml = await readFile(file, 'utf8');
  t.match(xml, '<type>_https._tcp</type>');
  t.match(xml, `<port>${app.port}</port>`);
  t.match(xml, '<name replace-wildcards="yes">LIA on %h</name>');
  // The file is written before avahi is asked for its host name; wait for publishing to finish.
  type Net = { mdns: { responder: string; hostname: string; services: { port: number }[] } };
  const net = await waitFor('publishing through avahi', async () => {
    const body = (await (await app.fetch('/system/network')).json()) as Net;
    return body.mdns.responder === 'avahi' && body;
  });
  t.equal(net.mdns.responder, 'avahi');
  t.match(net.mdns.hostname, /\.local$/);
  t.equal(net.mdns.services[0]?.port, app.port);
  await app.close();
  closed = true;
  t.notOk(existsSync(file), 'the service file is removed when the appliance stops');
});

t.test('avahi detection and the service file', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-avahi-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  t.equal(await avahiRunning(path.join(dir, 'missing')), false);
  await writeFile(path.join(dir, 'dead'), '999999999\n');
  t.equal(await avahiRunning(path.join(dir, 'dead')), false, 'a stale pid file');
  await writeFile(path.join(dir, 'junk'), 'not a pid\n');
  t.equal(await avahiRunning(path.join(dir, 'junk')), false);
  const xml = serviceFileXml('R&D <box> on %h', 8443, ['path=/', 'version=1.0.0']);
  t.match(xml, '<name replace-wildcards="yes">R&amp;D &lt;box&gt; on %h</name>');
  t.match(xml, '<txt-record>version=1.0.0</txt-record>');
  t.match(xml, '<!DOCTYPE service-group SYSTEM "avahi-service.dtd">');
});
