/**
 * Every mainstream TLS stack verifies the appliance with only its CA trusted: a real appliance
 * (listening on `::`, dual stack, as by default) is reached by `localhost`, its `.local` name, 127.0.0.1 and ::1
 * with Node, curl, Bun, Go, Python, GnuTLS, NSS and Chromium, each asking for `/health`.
 *
 * With `nameConstraints: strict` (address ranges in the root's Name Constraints) the same holds for
 * every stack but Bun, whose BoringSSL refuses any address constraint: that is the trade-off
 * docs/security.md describes, asserted here so that the docs stay true.
 *
 * A missing tool fails the test naming the package that installs it (.ci/run installs them).
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { writeFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';
import { bunBinary, buildGoClient, chromiumOutcomes, clients, nssDatabase, tempDir, type Target } from '../fixtures/tls/clients.js';

const run = promisify(execFile);
const CHROMIUM = process.env['LIA_TEST_CHROMIUM'] ?? '/usr/bin/chromium';

async function which(file: string): Promise<boolean> {
  if (file.includes('/'))
    return run(file, ['--version']).then(
      () => true,
      () => false,
    );
  return run('sh', ['-c', `command -v "$1"`, 'sh', file]).then(
    () => true,
    () => false,
  );
}

for (const profile of ['compatible', 'strict'] as const) {
  t.test(`nameConstraints: ${profile}`, async (t) => {
    const dir = await tempDir();
    t.teardown(() => rm(dir, { recursive: true, force: true }));

    const bun = await bunBinary();
    const missing: string[] = [];
    if (!bun) missing.push('bun: the npm packages bun and @oven/bun-linux-x64 (devDependencies of this project)');
    for (const [file, pkg] of [
      ['curl', 'curl'],
      ['go', 'golang-go'],
      ['python3', 'python3'],
      ['gnutls-cli', 'gnutls-bin'],
      ['tstclnt', 'libnss3-tools'],
      ['certutil', 'libnss3-tools'],
      [CHROMIUM, 'chromium'],
    ] as const) {
      if (!(await which(file))) missing.push(`${file}: the Debian package ${pkg}`);
    }
    if (missing.length > 0) {
      t.fail(`TLS clients missing (install them; .ci/run does): ${missing.join('; ')}`);
      return;
    }

    const app = await startTestAppliance({ plugins: RUNTIME_ONLY, host: '::', env: { LIA_CA_NAME_CONSTRAINTS: profile } });
    t.teardown(app.close);
    const caFile = path.join(dir, 'lia-root-ca.crt');
    await writeFile(caFile, app.ca);
    const constrainsAddresses = (await run('openssl', ['x509', '-noout', '-ext', 'nameConstraints', '-in', caFile])).stdout.includes('IP:');
    t.equal(constrainsAddresses, profile === 'strict', `the root constrains addresses only with strict`);

    const leafNames = new X509Certificate(app.hooks.tls.get().current().cert).subjectAltName ?? '';
    const dotLocal = /DNS:([^,\s]+\.local)\b/.exec(leafNames)?.[1];
    t.ok(dotLocal, `the leaf carries a .local name (${leafNames})`);
    const targets: Target[] = [
      { host: 'localhost', address: '127.0.0.1', port: app.port },
      { host: dotLocal ?? 'missing.local', address: '127.0.0.1', port: app.port },
      { host: '127.0.0.1', address: '127.0.0.1', port: app.port },
      { host: '::1', address: '::1', port: app.port },
    ];

    const nssHome = path.join(dir, 'home');
    await nssDatabase(nssHome, caFile);
    const emptyDir = path.join(dir, 'no-certs');
    await run('mkdir', ['-p', emptyDir]);
    const goClient = await buildGoClient(dir);

    for (const client of clients({ bun, goClient, nssHome, emptyDir })) {
      const refuses = profile === 'strict' && client.name.startsWith('Bun');
      for (const target of targets) {
        const got = await client.get(caFile, target);
        if (refuses) {
          t.equal(got.status, null, `${client.name} refuses ${target.host} under strict constraints`);
          t.match(got.text, /UNSUPPORTED_CONSTRAINT_TYPE|unsupported name constraint type/, `${client.name}: BoringSSL does not process address constraints`);
        } else {
          t.equal(got.status, '200', `${client.name} verifies ${target.host} (${target.address}) ${got.status ? '' : got.text.trim().slice(0, 300)}`);
        }
      }
    }
    const browser = await chromiumOutcomes(CHROMIUM, nssHome, targets);
    targets.forEach((target, i) => {
      t.equal(browser[i]?.status, '200', `Chromium verifies ${target.host} (${target.address}) ${browser[i]?.text ?? ''}`);
    });
  });
}

t.test('a client that does not trust the CA is refused (the matrix is not passing by default)', async (t) => {
  const app = await startTestAppliance({ plugins: RUNTIME_ONLY });
  t.teardown(app.close);
  const dir = await tempDir();
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const other = await startTestAppliance({ plugins: RUNTIME_ONLY });
  const wrongCa = path.join(dir, 'other-ca.crt');
  await writeFile(wrongCa, other.ca);
  await other.close();
  const nssHome = path.join(dir, 'home');
  await nssDatabase(nssHome, wrongCa);
  const target: Target = { host: 'localhost', address: '127.0.0.1', port: app.port };
  const bun = await bunBinary();
  for (const client of clients({ bun, goClient: await buildGoClient(dir), nssHome, emptyDir: dir })) {
    const got = await client.get(wrongCa, target);
    t.equal(got.status, null, `${client.name} refuses a certificate from another CA`);
  }
  const [browser] = await chromiumOutcomes(CHROMIUM, nssHome, [target]);
  t.equal(browser?.status, null, 'Chromium refuses it too');
  t.match(browser?.text, /ERR_CERT_AUTHORITY_INVALID/);
});
