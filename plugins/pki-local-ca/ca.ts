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
import { writeFileAtomic } from 'lia/plugin';
import { generateRoot, issueLeaf, permittedDnsOf, type KeyPairPem } from './certificates.js';
import { subjectNames, type SubjectNames } from './names.js';

export interface CaFiles {
  dir: string;
  rootCert: string;
  rootKey: string;
  leafCert: string;
  leafKey: string;
}

export function caFiles(dataDir: string): CaFiles {
  const dir = path.join(dataDir, 'pki');
  return {
    dir,
    rootCert: path.join(dir, 'root.crt'),
    rootKey: path.join(dir, 'root.key'),
    leafCert: path.join(dir, 'leaf.crt'),
    leafKey: path.join(dir, 'leaf.key'),
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

/** Loads the root, or creates it (with the current bare host name permitted) on first boot. */
export async function loadOrCreateRoot(files: CaFiles, hostname: string, now: Date): Promise<{ root: KeyPairPem; created: boolean }> {
  await mkdir(files.dir, { recursive: true, mode: 0o700 });
  const existing = await readPair(files.rootCert, files.rootKey);
  if (existing) return { root: existing, created: false };
  const bare = hostname.toLowerCase().replace(/\.local$/, '');
  const extra = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(bare) && bare !== 'localhost' ? [bare] : [];
  const root = await generateRoot(`LIA Local Root CA (${bare})`, now, extra);
  await writePair(files.rootCert, files.rootKey, root);
  return { root, created: true };
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
): Promise<{ leaf: KeyPairPem; issued: string | null }> {
  const names = subjectNames(hostname, permittedDnsOf(root.certPem));
  const existing = await readPair(files.leafCert, files.leafKey);
  const reason = existing ? renewalReason(existing.certPem, root.certPem, names, now, policy) : 'no leaf yet';
  if (existing && reason === null) return { leaf: existing, issued: null };
  const leaf = await issueLeaf(root, { ...names, days: policy.days }, now);
  await writePair(files.leafCert, files.leafKey, leaf);
  return { leaf, issued: reason };
}
