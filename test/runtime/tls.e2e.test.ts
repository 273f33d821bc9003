/**
 * HTTPS with the appliance's own CA: what a user does with curl (download the CA without a key,
 * compare the fingerprint with the console's, then verify with --cacert), which names the leaf
 * covers, the TLS policy, file modes, and a certificate swap that keeps open connections alive.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const run = promisify(execFile);

function connect(port: number, options: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...options }, () => resolve(socket));
    socket.once('error', reject);
  });
}

t.test('the curl walk-through: CA download, fingerprint, --cacert', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const caFile = path.join(app.dataDir, 'downloaded-ca.crt');

  // Insecure only for the first download, as the spec allows.
  const dl = await run('curl', ['-sk', '-D', '-', `${app.url}/system/ca-cert`, '-o', caFile]);
  t.match(dl.stdout, /content-type: application\/x-pem-file/i);
  t.match(dl.stdout, /content-disposition: attachment/i);
  const { stdout: fp } = await run('openssl', ['x509', '-in', caFile, '-noout', '-fingerprint', '-sha256']);
  const opensslFp = fp.trim().split('=')[1] ?? '';
  t.match(opensslFp, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/, 'openssl prints colon-separated upper-case hex');
  t.ok(app.console.includes(`CA SHA-256    ${opensslFp}`), 'the console banner shows the same fingerprint');

  const health = await run('curl', ['-sS', '--cacert', caFile, `${app.url}/health`]);
  const body = JSON.parse(health.stdout) as { status: string; version: string; services: Record<string, string> };
  t.equal(body.status, 'ok');
  t.match(body.version, /^\d+\.\d+\.\d+$/);
  t.equal(body.services['svc-certs'], 'active');

  const host = os.hostname();
  for (const name of ['localhost', `${host}.local`]) {
    const r = await run('curl', ['-sS', '--cacert', caFile, '--resolve', `${name}:${app.port}:127.0.0.1`, `https://${name}:${app.port}/health`]);
    t.match(r.stdout, /"status":"ok"/, `verifies for ${name}`);
  }
  const r = await run('curl', ['-sS', '--cacert', caFile, `https://127.0.0.1:${app.port}/health`]);
  t.match(r.stdout, /"status":"ok"/, 'verifies for 127.0.0.1');
});

t.test('the leaf covers <host>.local and every permitted interface address', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const socket = await connect(app.port, { ca: app.ca, servername: 'localhost' });
  const leaf = socket.getPeerX509Certificate();
  socket.destroy();
  t.ok(leaf, 'a certificate was presented');
  if (!leaf) return;
  t.ok(leaf.checkIssued(new X509Certificate(app.ca)), 'issued by the downloadable root');
  const host = os.hostname().toLowerCase();
  t.not(
    tls.checkServerIdentity(host, { subject: {}, subjectaltname: leaf.subjectAltName } as never),
    undefined,
    `does not cover the bare host name ${host} (a single label cannot be constrained safely)`,
  );
  t.equal(tls.checkServerIdentity(`${host}.local`, { subject: {}, subjectaltname: leaf.subjectAltName } as never), undefined);
  const addresses = Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a && !(a.family === 'IPv6' && a.address.startsWith('fe80')))
    .map((a) => a!.address)
    .filter((a) => /^(10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|127\.|::1$|f[cd])/.test(a));
  t.ok(addresses.length >= 1);
  for (const ip of addresses) t.ok(leaf.checkIP(ip), `covers ${ip}`);
  const days = (new Date(leaf.validTo).getTime() - new Date(leaf.validFrom).getTime()) / 86_400_000;
  t.ok(days <= 398, `leaf lifetime ${days.toFixed(1)} days ≤ 397 (+ backdating)`);
  t.equal(leaf.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'ECDSA P-256');

  const root = new X509Certificate(app.ca);
  const rootYears = (new Date(root.validTo).getTime() - new Date(root.validFrom).getTime()) / (365.25 * 86_400_000);
  t.ok(rootYears > 9.9 && rootYears < 10.1, 'root valid 10 years');
  const rootFile = path.join(app.dataDir, 'pki', 'root.crt');
  const text = (await run('openssl', ['x509', '-in', rootFile, '-noout', '-ext', 'nameConstraints'])).stdout;
  t.match(text, /Permitted:/);
  t.match(text, /DNS:local\b/);
  t.notMatch(text, /IP:/, 'no address constraint by default (BoringSSL refuses them; see tls-matrix.e2e.test.ts)');
  t.notMatch(text, /DNS:com\b/);
});

t.test('TLS policy: 1.2 and 1.3 only, AEAD only', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const ok13 = await connect(app.port, { ca: app.ca, servername: 'localhost', minVersion: 'TLSv1.3' });
  t.equal(ok13.getProtocol(), 'TLSv1.3');
  ok13.destroy();
  const ok12 = await connect(app.port, { ca: app.ca, servername: 'localhost', maxVersion: 'TLSv1.2' });
  t.match(ok12.getCipher().name, /GCM|CHACHA20/);
  ok12.destroy();
  await t.rejects(
    connect(app.port, { ca: app.ca, servername: 'localhost', minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }),
    'TLS 1.1 is refused',
  );
  await t.rejects(
    connect(app.port, { ca: app.ca, servername: 'localhost', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES128-SHA' }),
    'CBC suites are refused',
  );
});

t.test('keys and certificates are 0600 in 0700 directories', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  for (const dir of ['pki', 'keys']) t.equal((await stat(path.join(app.dataDir, dir))).mode & 0o777, 0o700, `${dir}/ is 0700`);
  for (const f of ['pki/root.key', 'pki/root.crt', 'pki/leaf.key', 'pki/leaf.crt', 'keys/master.key']) {
    t.equal((await stat(path.join(app.dataDir, f))).mode & 0o777, 0o600, `${f} is 0600`);
  }
});

t.test('a renewed leaf is swapped in without a restart and open connections survive', async (t) => {
  const app = await startTestAppliance({ plugins: { ...RUNTIME_ONLY, 'pki-local-ca': { options: { renewAfterRatio: 0.0000001 } } } });
  t.teardown(app.close);
  const before = await connect(app.port, { ca: app.ca, servername: 'localhost' });
  const oldSerial = before.getPeerX509Certificate()?.serialNumber;

  t.equal(await app.hooks.tls.get().refresh('test'), true, 'a new leaf was issued');
  const after = await connect(app.port, { ca: app.ca, servername: 'localhost' });
  const newSerial = after.getPeerX509Certificate()?.serialNumber;
  t.not(newSerial, oldSerial, 'new connections get the new leaf');
  after.destroy();

  // The connection opened before the swap still carries HTTP.
  const reply = await new Promise<string>((resolve, reject) => {
    let data = '';
    before.on('data', (c: Buffer) => {
      data += c.toString();
      if (data.includes('"status"')) resolve(data);
    });
    before.on('error', reject);
    before.write(`GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n`);
  });
  t.match(reply, /^HTTP\/1\.1 200/, 'the old connection still answers');
  before.destroy();

  await t.rejects(
    connect(app.port, { ca: app.ca, servername: 'localhost', maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA' }),
    'the TLS policy survived the swap',
  );
  const leafOnDisk = new X509Certificate(await readFile(path.join(app.dataDir, 'pki', 'leaf.crt'), 'utf8'));
  t.equal(leafOnDisk.serialNumber, newSerial, 'the file on disk is the served leaf');
});

t.test("idle keep-alive connections stay open 72 s, longer than Node's default 5 s", async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const socket = await connect(app.port, { ca: app.ca, servername: 'localhost' });
  t.teardown(() => socket.destroy());
  let data = '';
  socket.on('data', (c: Buffer) => (data += c.toString()));
  const ask = async (): Promise<string> => {
    data = '';
    socket.write(`GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n`);
    while (!data.includes('"status"')) {
      if (socket.destroyed) throw new Error('the server closed the connection');
      await new Promise((r) => setTimeout(r, 20));
    }
    return data;
  };
  t.match(await ask(), /\r\nkeep-alive: timeout=72\r\n/i, 'the server announces 72 s');
  // Node's own default would have closed the idle connection after 5 s.
  await new Promise((r) => setTimeout(r, 5_500));
  t.match(await ask(), /^HTTP\/1\.1 200/, 'the same connection answers after 5.5 s idle');
});
