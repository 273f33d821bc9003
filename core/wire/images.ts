/**
 * Images as the engine takes them: base64 text (Ollama's `images`; the payload of a `data:` URL on
 * the OpenAI and Anthropic surfaces). {@link checkImage} is the one check every surface's images
 * go through before a backend sees them: valid base64, not empty, at most the size limit, and one
 * of the formats llama.cpp's image loader reads (PNG, JPEG, GIF, WebP, BMP), told by its first
 * bytes, never by a declared type. An image that passes and still does not decode (a truncated
 * PNG) is refused by the backend with a 400 of its own.
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

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function head(b64: string): Buffer {
  return Buffer.from(b64.slice(0, 24), 'base64');
}

/** The media type of base64 image data by its first bytes; `application/octet-stream` when unknown. */
export function imageMimeType(b64: string): string {
  const b = head(b64);
  return SIGNATURES.find((s) => s.test(b))?.mime ?? 'application/octet-stream';
}

/** What {@link checkImage} found. */
export interface CheckedImage {
  mime: string;
  /** Decoded size in bytes. */
  bytes: number;
}

/**
 * Checks one base64 image (whitespace inside is ignored): a 400 naming `param` when it is not
 * base64, is empty, decodes to more than `maxBytes`, or is not PNG, JPEG, GIF, WebP or BMP.
 */
export function checkImage(b64: string, maxBytes: number, param = 'images'): CheckedImage {
  const text = /\s/.test(b64) ? b64.replace(/\s+/g, '') : b64;
  if (text.length === 0) throw Errors.badRequest('an image is empty', { param });
  if (text.length % 4 === 1 || !BASE64.test(text)) throw Errors.badRequest('an image is not valid base64 data', { param });
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const bytes = Math.floor((text.length * 3) / 4) - padding;
  if (bytes > maxBytes) throw Errors.badRequest(`an image is ${bytes} bytes; the limit is ${maxBytes} (the engine's maxImageBytes)`, { param });
  const mime = SIGNATURES.find((s) => s.test(head(text)))?.mime;
  if (!mime) throw Errors.badRequest('an image is not a PNG, JPEG, GIF, WebP or BMP file', { param });
  return { mime, bytes };
}

/**
 * The base64 payload of a `data:` URL of an image (`data:image/png;base64,...`), or a 400 naming
 * `param` for any other URL. Remote URLs (`https://...`) are never fetched: the appliance does not
 * reach out to addresses a client names (see docs/security.md).
 */
export function imageFromDataUrl(url: string, param: string): string {
  const m = /^data:([^;,]*)((?:;[^;,]*)*),/i.exec(url.slice(0, 256));
  if (!m) {
    if (/^https?:/i.test(url)) throw Errors.badRequest('remote image URLs are not fetched; send the image inline as a data: URL (base64)', { param });
    throw Errors.badRequest('an image URL must be a data: URL with base64 data', { param });
  }
  if (!/;base64$/i.test(m[2] ?? '')) throw Errors.badRequest('an image data: URL must be base64-encoded (;base64,)', { param });
  return url.slice(m[0].length);
}
