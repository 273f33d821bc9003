/**
 * The master-key store. The key file (`<data dir>/keys/master.key`, 0600 in a 0700 directory)
 * holds the key so that `lia key show` on the appliance can print it; in memory only its SHA-256
 * is kept, compared in constant time. Rotation writes the new key atomically and swaps the
 * digest in one assignment, so the old key fails from the next request on, and the generations
 * the old key started end (its principal's `signal` is aborted). Rotations are
 * serialised, so concurrent ones cannot leave the file and the digest disagreeing.
 *
 * The key format is defined here too: `lia_<43 chars of base64url: 256 random bits>_<6 chars:
 * CRC-32 of the body in base62>`. The prefix makes a leaked key easy to recognise by secret
 * scanners; the checksum lets the appliance tell a mistyped key (400-style message, no lookup)
 * from a wrong one.
 *
 * Named, scoped keys live beside it in `./named-keys.ts`.
 *
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { Errors, type Principal } from 'lia/plugin';
import type { KeyStore } from './public.js';
import { writeFileAtomic } from 'lia/utils';

export const KEY_PREFIX = 'lia_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SHAPE = /^lia_([A-Za-z0-9_-]{43})_([0-9A-Za-z]{6})$/;

function base62(n: number, width: number): string {
  let out = '';
  for (let i = 0; i < width; i++) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

function checksum(body: string): string {
  return base62(crc32(body), 6);
}

/** A new random key. */
export function generateKey(): string {
  const body = randomBytes(32).toString('base64url');
  return `${KEY_PREFIX}${body}_${checksum(body)}`;
}

/** `ok` for a well-formed key; otherwise why it cannot be a key (without echoing it). */
export function checkShape(key: string): 'ok' | 'not-lia' | 'checksum' {
  const m = SHAPE.exec(key);
  if (!m) return 'not-lia';
  return checksum(m[1] as string) === m[2] ? 'ok' : 'checksum';
}

/** SHA-256 of a key; all that is kept in memory for comparison. */
export function digestOf(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** The last four characters, safe to show as a hint. */
export function hintOf(key: string): string {
  return key.slice(-4);
}

/** `lia_ab…yz`: enough to tell keys apart, far too little to guess one. */
export function namedHint(key: string): string {
  return `${key.slice(0, 6)}…${key.slice(-2)}`;
}

/** The master key's principal; a new one (with a fresh `signal`) after each rotation. */
function masterPrincipal(): { principal: Principal; withdraw: (reason: Error) => void } {
  const withdrawn = new AbortController();
  const principal: Principal = Object.freeze({ id: 'master', name: 'master', scopes: Object.freeze(['*']), signal: withdrawn.signal });
  return { principal, withdraw: (reason) => withdrawn.abort(reason) };
}

export class FileKeyStore implements KeyStore {
  readonly masterKeyPath: string;
  /** The key, when this boot created it (the banner prints it once). */
  firstBootKey: string | null = null;
  /** `lia_ab…yz` of the current key (see named-keys.ts). */
  hint = '';
  /** When the current key was written. */
  createdAt = new Date(0);
  #digest: Buffer = Buffer.alloc(32);
  #master = masterPrincipal();
  /** The last rotation started; the next one waits for it. */
  #rotation: Promise<unknown> = Promise.resolve();

  private constructor(file: string) {
    this.masterKeyPath = file;
  }

  /** Opens the store, creating the key on first boot. */
  static async open(dataDir: string): Promise<FileKeyStore> {
    const file = path.join(dataDir, 'keys', 'master.key');
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const store = new FileKeyStore(file);
    let key: string | null = null;
    try {
      key = (await readFile(file, 'utf8')).trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`reading ${file}: ${(err as Error).message}`, { cause: err });
    }
    if (key !== null && checkShape(key) !== 'ok') throw new Error(`${file} does not hold a valid LIA key; remove it to create a new one`);
    if (key === null) {
      key = generateKey();
      await writeFileAtomic(file, key + '\n');
      store.firstBootKey = key;
    }
    store.#digest = digestOf(key);
    store.hint = namedHint(key);
    store.createdAt = (await stat(file)).mtime;
    return store;
  }

  verify(secret: string): Principal | null {
    return this.verifyDigest(digestOf(secret));
  }

  /** {@link verify} for a secret already hashed (the auth strategy hashes once for every store). */
  verifyDigest(digest: Buffer): Principal | null {
    return timingSafeEqual(digest, this.#digest) ? this.#master.principal : null;
  }

  /**
   * Rotations run one at a time: each writes the file and swaps the digest before the next
   * starts, so after any burst of concurrent rotations the file holds the key the server accepts
   * (the last one returned) and every earlier key fails.
   */
  rotateMaster(): Promise<{ key: string; hint: string }> {
    const next = this.#rotation
      .catch(() => undefined)
      .then(async () => {
        const key = generateKey();
        await writeFileAtomic(this.masterKeyPath, key + '\n');
        this.#digest = digestOf(key);
        const old = this.#master;
        this.#master = masterPrincipal();
        old.withdraw(Errors.unauthorized('the master API key was rotated; use its new secret'));
        this.hint = namedHint(key);
        this.createdAt = new Date();
        this.firstBootKey = null;
        return { key, hint: hintOf(key) };
      });
    this.#rotation = next;
    return next;
  }
}
