/**
 * The local root can only vouch for local names, whatever the box is called: on a host named
 * like a public top-level domain (`dev`), a certificate for `www.google.dev` signed with the root
 * key is rejected by OpenSSL and by Node's TLS client, while `dev.local` verifies. A root made by
 * an earlier version that permitted the bare host name is replaced, and the console says so.
 *
 * `test/fixtures/pki/unsafe-root.*` is such an earlier root (test-only key), permitting `dev`.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import t from 'tap';
import { caFiles, loadOrCreateRoot } from '../../plugins/pki-local-ca/ca.js';
import { issueLeaf, permittedDnsOf, type KeyPairPem } from '../../plugins/pki-local-ca/certificates.js';
import { subjectNames } from '../../plugins/pki-local-ca/names.js';
import { startTestAppliance } from '../helpers/appliance.js';
import { RUNTIME_ONLY } from '../helpers/plugin-sets.js';

const run = promisify(execFile);
const FIXTURE = path.resolve('test/fixtures/pki');

/** `openssl verify` of a leaf against the root alone: its output, and whether it passed. */
async function opensslVerify(dir: string, root: KeyPairPem, leaf: KeyPairPem): Promise<{ ok: boolean; text: string }> {
  await writeFile(path.join(dir, 'v-root.crt'), root.certPem);
  await writeFile(path.join(dir, 'v-leaf.crt'), leaf.certPem);
  try {
    const { stdout, stderr } = await run('openssl', ['verify', '-CAfile', path.join(dir, 'v-root.crt'), path.join(dir, 'v-leaf.crt')]);
    return { ok: true, text: stdout + stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    return { ok: false, text: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

/** Serves `leaf` over TLS and connects as a Node client trusting only `root`, for `servername`. */
async function nodeTlsVerdict(root: KeyPairPem, leaf: KeyPairPem, servername: string): Promise<string> {
  const server = tls.createServer({ key: leaf.keyPem, cert: leaf.certPem }, (s) => s.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    return await new Promise<string>((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port, servername, ca: root.certPem }, () => {
        socket.destroy();
        resolve('trusted');
      });
      socket.on('error', (err: NodeJS.ErrnoException) => resolve(`${err.code}: ${err.message}`));
    });
  } finally {
    server.close();
  }
}

t.test('on a host named "dev", the root cannot sign for www.google.dev', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-ca-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const now = new Date();
  const { root } = await loadOrCreateRoot(caFiles(dir), 'dev', now);
  t.notOk(permittedDnsOf(root.certPem).includes('dev'), 'the bare host name is not a permitted subtree');
  t.ok(permittedDnsOf(root.certPem).every((d) => d.includes('.') || d === 'local' || d === 'localhost'), 'no single label but local and localhost');
  t.notOk(subjectNames('dev', permittedDnsOf(root.certPem), {}).dnsNames.includes('dev'), 'the leaf does not carry the bare host name');

  const evil = await issueLeaf(root, { dnsNames: ['www.google.dev'], ipAddresses: [] }, now);
  const good = await issueLeaf(root, { dnsNames: ['dev.local'], ipAddresses: ['127.0.0.1'] }, now);
  const refused = await opensslVerify(dir, root, evil);
  t.notOk(refused.ok, 'openssl verify refuses www.google.dev');
  t.match(refused.text, /permitted subtree violation/i);
  t.ok((await opensslVerify(dir, root, good)).ok, 'openssl verify accepts dev.local');
  const verdict = await nodeTlsVerdict(root, evil, 'www.google.dev');
  t.match(verdict, /permitted subtree violation/, `Node refuses www.google.dev (${verdict})`);
  t.equal(await nodeTlsVerdict(root, good, 'dev.local'), 'trusted', 'Node trusts dev.local');
});

t.test('names the operator configures (with a dot) are permitted and served', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-ca-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { root } = await loadOrCreateRoot(caFiles(dir), 'dev', new Date(), ['lia.example.internal']);
  t.ok(permittedDnsOf(root.certPem).includes('lia.example.internal'));
  t.ok(subjectNames('dev', permittedDnsOf(root.certPem), {}, ['lia.example.internal']).dnsNames.includes('lia.example.internal'));
  await t.rejects(loadOrCreateRoot(caFiles(path.join(dir, 'b')), 'dev', new Date(), ['internal']), /single-label/, 'a single label is refused');
});

t.test('an earlier root that permits the bare host name is replaced, and the console says what to do', async (t) => {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'lia-test-'));
  const pki = path.join(dataDir, 'pki');
  await mkdir(pki, { recursive: true, mode: 0o700 });
  await cp(path.join(FIXTURE, 'unsafe-root.crt'), path.join(pki, 'root.crt'));
  await cp(path.join(FIXTURE, 'unsafe-root.key'), path.join(pki, 'root.key'));
  const oldPem = await readFile(path.join(FIXTURE, 'unsafe-root.crt'), 'utf8');
  t.ok(permittedDnsOf(oldPem).includes('dev'), 'the fixture permits "dev"');

  const app = await startTestAppliance({ plugins: RUNTIME_ONLY, dataDir });
  t.teardown(async () => {
    await app.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  t.not(app.ca, oldPem, 'a new root serves');
  t.notOk(permittedDnsOf(app.ca).includes('dev'), 'without the unsafe subtree');
  t.equal(await readFile(path.join(pki, 'root-retired.crt'), 'utf8'), oldPem, 'the old certificate is kept for reference');
  t.not((await readFile(path.join(pki, 'root.key'), 'utf8')).trim(), (await readFile(path.join(FIXTURE, 'unsafe-root.key'), 'utf8')).trim(), 'the old key is gone');
  t.match(app.console, /CA replaced/, 'the banner says the root was replaced');
  t.match(app.console, /import the new root/, 'and what to do');
  t.equal((await app.fetch('/health')).status, 200, 'clients trusting the new root connect');
});
