/**
 * Image references as the surfaces and the engine pass them: base64 text, the payload of a `data:`
 * URL, or an `http(s)://` URL the engine fetches where the operator allows it. The media type of
 * base64 data is told by its first bytes, never by a declared type (the formats llama.cpp's image
 * loader reads: PNG, JPEG, GIF, WebP, BMP). The engine's own checks (size, dimensions) are its
 * `image-check.ts`.
 *
 * @module
 */
import { Errors } from '../errors.js';

/** The formats taken, by their first bytes. */
const SIGNATURES: ReadonlyArray<{ mime: string; test: (b: Buffer) => boolean }> = [
  { mime: 'image/png', test: (b) => b.length >= 8 && b.readUInt32BE(0) === 0x89504e47 && b.readUInt32BE(4) === 0x0d0a1a0a },
  { mime: 'image/jpeg', test: (b) => b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { mime: 'image/gif', test: (b) => b.length >= 6 && /^GIF8[79]a$/.test(b.toString('latin1', 0, 6)) },
  { mime: 'image/webp', test: (b) => b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WEBP' },
  { mime: 'image/bmp', test: (b) => b.length >= 2 && b.toString('latin1', 0, 2) === 'BM' },
];

/** The first bytes of base64 data, decoded. */
function head(b64: string): Buffer {
  return Buffer.from(b64.slice(0, 24), 'base64');
}

/** The media type of base64 image data by its first bytes; `application/octet-stream` when unknown. */
export function imageMimeType(b64: string): string {
  const b = head(b64);
  return SIGNATURES.find((s) => s.test(b))?.mime ?? 'application/octet-stream';
}

/** Whether an image reference is a remote URL (`http://`, `https://`) rather than base64 data. */
export function isRemoteImage(image: string): boolean {
  return /^https?:\/\//i.test(image.slice(0, 8));
}

/**
 * An image URL as the engine takes it: the base64 payload of a `data:` URL
 * (`data:image/png;base64,...`), or an `http(s)://` URL as it is, which the engine fetches only
 * where the operator allows it (`engine.remoteImages`; otherwise a 400). Any other URL is a 400
 * naming `param`.
 */
export function imageFromDataUrl(url: string, param: string): string {
  if (isRemoteImage(url)) return url;
  const m = /^data:([^;,]*)((?:;[^;,]*)*),/i.exec(url.slice(0, 256));
  if (!m) throw Errors.badRequest('an image URL must be a data: URL with base64 data (or an http(s) URL)', { param });
  if (!/;base64$/i.test(m[2] ?? '')) throw Errors.badRequest('an image data: URL must be base64-encoded (;base64,)', { param });
  return url.slice(m[0].length);
}
