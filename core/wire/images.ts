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

/**
 * Downloads a remote image (only where the operator allows it: `engine.remoteImages`), following
 * redirects, within `timeoutMs`, reading no more than `maxBytes`; returns it as base64.
 * Every failure is a 400 naming `param` (the URL is the client's).
 */
export async function fetchImage(url: string, maxBytes: number, param: string, timeoutMs = 10_000): Promise<string> {
  let res: Response;
  try {
    res = await fetch(url, { redirect: 'follow', signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'image/*' } });
  } catch (err) {
    throw Errors.badRequest(`the image at ${url} could not be fetched (${(err as Error).name === 'TimeoutError' ? 'timed out' : (err as Error).message})`, {
      param,
    });
  }
  if (!res.ok || !res.body) {
    await res.body?.cancel().catch(() => undefined);
    throw Errors.badRequest(`the image at ${url} could not be fetched (HTTP ${res.status})`, { param });
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.length;
    if (size > maxBytes) {
      await res.body.cancel().catch(() => undefined);
      throw Errors.badRequest(`the image at ${url} is over ${maxBytes} bytes (the engine's maxImageBytes)`, { param });
    }
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('base64');
}
