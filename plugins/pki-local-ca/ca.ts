/**
 * The local CA's state on disk: load or create the root, load or issue the leaf, and decide when
 * the leaf must be renewed. Files live in `<data dir>/pki/` (0700), every file 0600, each written
 * atomically.
 *
 * @module
 */
import { X509Certificate } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileAtomic } from 'lia/utils';
import {
  fingerprint,
  generateRoot,
  issueLeaf,
  permittedDnsOf,
  profileOf,
  reissueRoot,
  unsafeSubtreesOf,
  type KeyPairPem,
  type NameConstraintProfile,
} from './certificates.js';
import { subjectNames, type SubjectNames } from './names.js';

export interface CaFiles {
  dir: string;
  rootCert: string;
  rootKey: string;
  leafCert: string;
  leafKey: string;
  /** The certificate of a root replaced because its constraints were unsafe (kept for reference). */
  retiredRoot: string;
  /** The previous certificate of a root re-issued (same key) under another constraints profile. */
  previousRoot: string;
}

export function caFiles(dataDir: string): CaFiles {
  const dir = path.join(dataDir, 'pki');
  return {
    dir,
    rootCert: path.join(dir, 'root.crt'),
    rootKey: path.join(dir, 'root.key'),
    leafCert: path.join(dir, 'leaf.crt'),
    leafKey: path.join(dir, 'leaf.key'),
    retiredRoot: path.join(dir, 'root-retired.crt'),
    previousRoot: path.join(dir, 'root-previous.crt'),
  };
}

async function readPair(certFile: string, keyFile: string): Promise<KeyPairPem | null> {
  try {
    return { certPem: await readFile(certFile, 'utf8'), keyPem: await readFile(keyFile, 'utf8') };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`reading ${certFile}: ${(err as Error).message}`, { cause: err });
  }
}

async function writePair(certFile: string, keyFile: string, pair: KeyPairPem): Promise<void> {
  await writeFileAtomic(keyFile, pair.keyPem);
  await writeFileAtomic(certFile, pair.certPem);
}

export interface RootState {
  root: KeyPairPem;
  created: boolean;
  /** Set when an existing root was replaced because it permitted single-label names. */
  replaced: { fingerprint: string; names: string[] } | null;
  /** Set when the root certificate was re-issued with the same key under `profile`. */
  reissued: { fingerprint: string; profile: NameConstraintProfile } | null;
}

/**
 * Loads the root, or creates it on first boot, permitting the operator's `dnsNames` besides the
 * local names, under the Name Constraints `profile` (`compatible` by default). A root made by an
 * earlier version that permits a single-label name (the bare host name, `lan`) is replaced: its
 * certificate is kept as `root-retired.crt`, its key is overwritten, and clients must import the
 * new root (the caller says so on the console and in the log). A root whose constraints follow the
 * other profile is re-issued with the same key and subject (see `reissueRoot`); the previous
 * certificate is kept as `root-previous.crt`.
 */
export async function loadOrCreateRoot(
  files: CaFiles,
  hostname: string,
  now: Date,
  dnsNames: readonly string[] = [],
  profile: NameConstraintProfile = 'compatible',
): Promise<RootState> {
  await mkdir(files.dir, { recursive: true, mode: 0o700 });
  const existing = await readPair(files.rootCert, files.rootKey);
  const unsafe = existing ? unsafeSubtreesOf(existing.certPem) : [];
  if (existing && unsafe.length === 0) {
    if (profileOf(existing.certPem) === profile) return { root: existing, created: false, replaced: null, reissued: null };
    const root = await reissueRoot(existing, profile);
    await writeFileAtomic(files.previousRoot, existing.certPem);
    await writeFileAtomic(files.rootCert, root.certPem);
    return { root, created: false, replaced: null, reissued: { fingerprint: fingerprint(existing.certPem), profile } };
  }
  if (existing) await writeFileAtomic(files.retiredRoot, existing.certPem);
  const bare = hostname.toLowerCase().replace(/\.local$/, '');
  const root = await generateRoot(`LIA Local Root CA (${bare})`, now, dnsNames, 10, profile);
  await writePair(files.rootCert, files.rootKey, root);
  return {
    root,
    created: true,
    replaced: existing ? { fingerprint: fingerprint(existing.certPem), names: unsafe } : null,
    reissued: null,
  };
}

/** The fingerprint of the certificate in `file` (the retired or previous root) while it is there; null otherwise. */
export async function rootFingerprintIn(file: string): Promise<string | null> {
  try {
    return fingerprint(await readFile(file, 'utf8'));
  } catch {
    return null;
  }
}

export interface RenewalPolicy {
  /** Fraction of the leaf's lifetime after which it is renewed. Defaults to 2/3. */
  renewAfterRatio: number;
}

/** Why the leaf must be replaced, or null when it is fine. */
export function renewalReason(leafPem: string, rootPem: string, names: SubjectNames, now: Date, policy: RenewalPolicy): string | null {
  const leaf = new X509Certificate(leafPem);
  const root = new X509Certificate(rootPem);
  if (!leaf.checkIssued(root) || !leaf.verify(root.publicKey)) return 'the leaf was not issued by the current root';
  const from = new Date(leaf.validFrom).getTime();
  const to = new Date(leaf.validTo).getTime();
  if (now.getTime() >= from + (to - from) * policy.renewAfterRatio) return 'the leaf is past its renewal point';
  for (const dns of names.dnsNames) if (!leaf.checkHost(dns, { subject: 'never' })) return `the leaf does not cover ${dns}`;
  for (const ip of names.ipAddresses) if (!leaf.checkIP(ip)) return `the leaf does not cover ${ip}`;
  return null;
}

/** Loads the leaf, and issues a new one when it is missing or needs renewal. */
export async function loadOrIssueLeaf(
  files: CaFiles,
  root: KeyPairPem,
  hostname: string,
  now: Date,
  policy: RenewalPolicy & { days: number },
  dnsNames: readonly string[] = [],
): Promise<{ leaf: KeyPairPem; issued: string | null }> {
  const names = subjectNames(hostname, permittedDnsOf(root.certPem), undefined, dnsNames);
  const existing = await readPair(files.leafCert, files.leafKey);
  const reason = existing ? renewalReason(existing.certPem, root.certPem, names, now, policy) : 'no leaf yet';
  if (existing && reason === null) return { leaf: existing, issued: null };
  const leaf = await issueLeaf(root, { ...names, days: policy.days }, now);
  await writePair(files.leafCert, files.leafKey, leaf);
  return { leaf, issued: reason };
}
