/**
 * Pure X.509 generation for the local CA: an ECDSA P-256 root with Name Constraints, and TLS
 * leaves it signs. No storage, no logging, no clock of its own (callers pass `now`): the
 * textbook layering of Caddy's `certificates.go`.
 *
 * @module
 */
import 'reflect-metadata';
import { webcrypto, createPrivateKey, createPublicKey, X509Certificate } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import * as asn from '@peculiar/asn1-x509';
import { AsnConvert } from '@peculiar/asn1-schema';

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/**
 * DNS names every root may vouch for: `local` (mDNS) and `localhost`, which can never be public
 * names, and `home.arpa` (RFC 8375, reserved for home networks). Besides these a root permits only
 * the names the operator configures, each with a dot: a bare single label (`dev`, `app`) may be
 * a public top-level domain, and permitting it would let the root sign for every site under it.
 */
export const PERMITTED_DNS = ['local', 'localhost', 'home.arpa'] as const;

/** True for a name a root may permit: one of {@link PERMITTED_DNS}, or any name with a dot. */
export function isSafeSubtree(name: string): boolean {
  return (PERMITTED_DNS as readonly string[]).includes(name) || (name.includes('.') && !name.startsWith('.') && !name.endsWith('.'));
}

/**
 * Private, loopback, link-local, CGNAT and ULA ranges: the only addresses a leaf carries, and,
 * with the `strict` profile, the only ones the root may vouch for.
 */
export const PERMITTED_IP = [
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '169.254.0.0/16',
  '127.0.0.0/8',
  '100.64.0.0/10',
  'fc00::/7',
  'fe80::/10',
  '::1/128',
] as const;

/** Clock skew allowance: certificates are valid from a few minutes before issuance. */
const BACKDATE_MS = 5 * 60_000;
const DAY_MS = 86_400_000;

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

async function exportKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }).toString();
}

async function importKeyPem(pem: string): Promise<webcrypto.CryptoKey> {
  const der = createPrivateKey(pem).export({ format: 'der', type: 'pkcs8' });
  return webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
}

function serial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f; // positive
  return Buffer.from(bytes).toString('hex');
}

/**
 * How much the root's Name Constraints say. `compatible` (the default) permits DNS subtrees only:
 * every mainstream TLS stack verifies it, BoringSSL (Bun, hence Claude Code and opencode) included,
 * which refuses any certificate whose CA carries an iPAddress constraint ("unsupported name
 * constraint type"). `strict` adds the private address ranges of {@link PERMITTED_IP}, so a leaked
 * root key cannot vouch for a public address either; Bun programs cannot verify such a root.
 */
export type NameConstraintProfile = 'compatible' | 'strict';

function nameConstraints(dns: readonly string[], profile: NameConstraintProfile): x509.Extension {
  const subtree = (base: ConstructorParameters<typeof asn.GeneralName>[0]) => new asn.GeneralSubtree({ base: new asn.GeneralName(base) });
  const value = new asn.NameConstraints({
    permittedSubtrees: new asn.GeneralSubtrees([
      ...dns.map((d) => subtree({ dNSName: d })),
      ...(profile === 'strict' ? PERMITTED_IP.map((c) => subtree({ iPAddress: c })) : []),
    ]),
  });
  return new x509.Extension(asn.id_ce_nameConstraints, true, AsnConvert.serialize(value));
}

async function rootCertificate(
  name: string,
  keys: webcrypto.CryptoKeyPair,
  validity: { notBefore: Date; notAfter: Date },
  dns: readonly string[],
  profile: NameConstraintProfile,
): Promise<string> {
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name,
    ...validity,
    keys: keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      nameConstraints(dns, profile),
    ],
  });
  return cert.toString('pem');
}

/**
 * A self-signed root, valid `years` (10 by default), constrained to local names (and, with the
 * `strict` profile, private ranges). `extraDns` adds permitted names the operator configured; each
 * must contain a dot. The profile defaults to `compatible`.
 */
export async function generateRoot(
  commonName: string,
  now: Date,
  extraDns: readonly string[] = [],
  years = 10,
  profile: NameConstraintProfile = 'compatible',
): Promise<KeyPairPem> {
  const unsafe = extraDns.filter((d) => !isSafeSubtree(d));
  if (unsafe.length > 0) throw new Error(`a root cannot permit single-label names (${unsafe.join(', ')}): they may be public top-level domains`);
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const notBefore = new Date(now.getTime() - BACKDATE_MS);
  const notAfter = new Date(now.getTime());
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + years);
  const certPem = await rootCertificate(`CN=${commonName}, O=LIA`, keys, { notBefore, notAfter }, [...PERMITTED_DNS, ...extraDns], profile);
  return { certPem, keyPem: await exportKeyPem(keys.privateKey) };
}

/**
 * The same root under another Name Constraints profile: same key, subject, validity and permitted
 * DNS names, a new serial number. Leaves it signed still verify against the previous certificate
 * (clients find the issuer by subject and check the signature with the same key), so clients that
 * trust either certificate keep working.
 */
export async function reissueRoot(root: KeyPairPem, profile: NameConstraintProfile): Promise<KeyPairPem> {
  const old = new x509.X509Certificate(root.certPem);
  const privateKey = createPrivateKey(root.keyPem);
  const pkcs8 = privateKey.export({ format: 'der', type: 'pkcs8' });
  const spki = createPublicKey(privateKey).export({ format: 'der', type: 'spki' });
  const keys = {
    privateKey: await webcrypto.subtle.importKey('pkcs8', pkcs8, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']),
    publicKey: await webcrypto.subtle.importKey('spki', spki, { name: 'ECDSA', namedCurve: 'P-256' }, true, ['verify']),
  };
  const certPem = await rootCertificate(old.subject, keys, { notBefore: old.notBefore, notAfter: old.notAfter }, permittedDnsOf(root.certPem), profile);
  return { certPem, keyPem: root.keyPem };
}

export interface LeafRequest {
  dnsNames: string[];
  ipAddresses: string[];
  /** Days of validity. Defaults to 397 (the most Apple accepts). */
  days?: number;
}

/** A TLS server leaf for the given names, signed by the root. */
export async function issueLeaf(root: KeyPairPem, request: LeafRequest, now: Date): Promise<KeyPairPem> {
  const rootCert = new x509.X509Certificate(root.certPem);
  const signingKey = await importKeyPem(root.keyPem);
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const days = Math.min(request.days ?? 397, 397);
  const cn = request.dnsNames[0] ?? request.ipAddresses[0] ?? 'localhost';
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${cn}`,
    issuer: rootCert.subject,
    notBefore: new Date(now.getTime() - BACKDATE_MS),
    notAfter: new Date(now.getTime() + days * DAY_MS),
    publicKey: keys.publicKey,
    signingKey: signingKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        ...request.dnsNames.map((value) => ({ type: 'dns' as const, value })),
        ...request.ipAddresses.map((value) => ({ type: 'ip' as const, value })),
      ]),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await x509.AuthorityKeyIdentifierExtension.create(rootCert),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await exportKeyPem(keys.privateKey) };
}

/** `openssl x509 -noout -fingerprint -sha256` form: upper-case colon-separated hex. */
export function fingerprint(certPem: string): string {
  return new X509Certificate(certPem).fingerprint256;
}

/** The permitted DNS names of a root that a root made today would refuse (single labels such as `dev`). */
export function unsafeSubtreesOf(certPem: string): string[] {
  return permittedDnsOf(certPem).filter((d) => !isSafeSubtree(d));
}

/** The DNS names a root's Name Constraints permit (empty when it has none). */
export function permittedDnsOf(certPem: string): string[] {
  const ext = new x509.X509Certificate(certPem).getExtension(asn.id_ce_nameConstraints);
  if (!ext) return [];
  const nc = AsnConvert.parse(ext.value, asn.NameConstraints);
  return (nc.permittedSubtrees ?? []).map((s) => s.base.dNSName).filter((d): d is string => typeof d === 'string');
}

/** The Name Constraints profile a root was made with: `strict` when it constrains addresses. */
export function profileOf(certPem: string): NameConstraintProfile {
  const ext = new x509.X509Certificate(certPem).getExtension(asn.id_ce_nameConstraints);
  if (!ext) return 'compatible';
  const nc = AsnConvert.parse(ext.value, asn.NameConstraints);
  return (nc.permittedSubtrees ?? []).some((s) => s.base.iPAddress !== undefined) ? 'strict' : 'compatible';
}

/** True when the certificate covers the name or IP address (no certificate: nothing is covered). */
export function certificateCovers(certPem: string | undefined, host: string): boolean {
  if (!certPem) return false;
  try {
    const cert = new X509Certificate(certPem);
    return /^[\d.]+$/.test(host) || host.includes(':') ? cert.checkIP(host) !== undefined : cert.checkHost(host) !== undefined;
  } catch {
    return false;
  }
}
