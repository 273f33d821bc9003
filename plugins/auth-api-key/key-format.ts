/**
 * The API key format: `lia_<43 chars of base64url: 256 random bits>_<6 chars: CRC-32 of the
 * body in base62>`. The prefix makes a leaked key easy to recognise by secret scanners; the
 * checksum lets the appliance tell a mistyped key (400-style message, no lookup) from a wrong one.
 *
 * @module
 */
import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

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
