/**
 * The URLs the banner, `/system/network` and the device console advertise: only names and
 * addresses the served certificate covers, the `.local` name mDNS actually announces, and
 * `localhost` only when the server listens there.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { advertisedUrls as advertise, type AdvertiseInput } from '../../plugins/pki-local-ca/advertise.js';
import { certificateCovers } from '../../plugins/pki-local-ca/certificates.js';

/** The list over the coverage check of the served leaf, as pki-local-ca combines them. */
const advertisedUrls = ({ certPem, ...rest }: Omit<AdvertiseInput, 'covers'> & { certPem: string | undefined }): string[] =>
  advertise({ ...rest, covers: (host) => certificateCovers(certPem, host) });

const run = promisify(execFile);
// A leaf like the PKI issues: localhost, box.local, box-2.local, loopback and one LAN address.
const { stdout: cert } = await run('openssl', [
  'req',
  '-x509',
  '-newkey',
  'ec',
  '-pkeyopt',
  'ec_paramgen_curve:P-256',
  '-nodes',
  '-keyout',
  '/dev/null',
  '-subj',
  '/CN=box',
  '-days',
  '1',
  '-addext',
  'subjectAltName=DNS:localhost,DNS:box.local,DNS:box-2.local,IP:127.0.0.1,IP:192.168.1.20',
]);
const interfaces = {
  lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }],
  eth0: [
    { address: '192.168.1.20', family: 'IPv4', internal: false },
    { address: '192.0.2.2', family: 'IPv4', internal: false },
  ],
} as unknown as NodeJS.Dict<import('node:os').NetworkInterfaceInfo[]>;

t.test('an address the certificate leaves out is not advertised', async (t) => {
  t.same(advertisedUrls({ bindHost: '0.0.0.0', port: 8443, hostname: 'box', certPem: cert, interfaces }), [
    'https://localhost:8443',
    'https://box.local:8443',
    'https://127.0.0.1:8443',
    'https://192.168.1.20:8443',
  ]);
});

t.test('the name mDNS announces after a conflict replaces NAME.local', async (t) => {
  const urls = advertisedUrls({ bindHost: '0.0.0.0', port: 8443, hostname: 'box', mdnsHostname: 'box-2.local', certPem: cert, interfaces });
  t.ok(urls.includes('https://box-2.local:8443'));
  t.notOk(urls.includes('https://box.local:8443'));
  const uncovered = advertisedUrls({ bindHost: '0.0.0.0', port: 8443, hostname: 'box', mdnsHostname: 'box-3.local', certPem: cert, interfaces });
  t.notOk(
    uncovered.some((u) => u.includes('.local')),
    'a .local name the leaf does not carry yet is held back',
  );
});

t.test('a loopback bind advertises loopback names only; no certificate, nothing', async (t) => {
  t.same(advertisedUrls({ bindHost: '127.0.0.1', port: 9000, hostname: 'box', certPem: cert, interfaces }), [
    'https://localhost:9000',
    'https://127.0.0.1:9000',
  ]);
  t.same(advertisedUrls({ bindHost: '0.0.0.0', port: 8443, hostname: 'box', certPem: undefined, interfaces }), []);
});
