/**
 * Images as the engine takes them: base64 text (Ollama's `images`; the payload of a `data:` URL on
 * the OpenAI and Anthropic surfaces, see `lia/utils`' `imageFromDataUrl`). {@link checkImage} is the one check every surface's images
 * go through before a backend sees them: valid base64, not empty, at most the size limit, one
 * of the formats llama.cpp's image loader reads (PNG, JPEG, GIF, WebP, BMP), told by its first
 * bytes, never by a declared type, and dimensions within {@link IMAGE_BOUNDS} as its header
 * declares them, read before anything decodes the image. An image that passes and still does not decode (a truncated
 * PNG) is refused by the backend with a 400 of its own.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import { imageMimeType } from 'lia/utils';

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Whether `text` (whitespace removed) is well-formed base64: the alphabet, padding, and a length a decoder takes. */
export const isBase64 = (text: string): boolean => text.length % 4 !== 1 && BASE64.test(text);

/** What {@link checkImage} found. */
export interface CheckedImage {
  mime: string;
  /** Decoded size in bytes. */
  bytes: number;
  /** The dimensions its header declares, in pixels. */
  width: number;
  height: number;
}

/**
 * Bounds on what an image may declare, checked before anything decodes it: llama.cpp's loader
 * decodes the whole bitmap (3 bytes a pixel) before its projector resizes it, so a 54-byte BMP
 * header declaring 26,000 × 26,000 pixels would cost 2 GB. At most 8,192 pixels a side (Anthropic
 * takes 8,000) and 25 megapixels per image (a 48 MP phone photo is refused, a 12 MP one taken),
 * and 50 megapixels across a request's images. docs/security.md, "Request bounds".
 */
export const IMAGE_BOUNDS = { side: 8192, pixels: 25_000_000, requestPixels: 50_000_000 } as const;

/** The width and height a PNG, GIF, BMP, WebP or JPEG header declares; null when it cannot be read. */
export function imageDimensions(b: Buffer, mime: string): { width: number; height: number } | null {
  const at = (n: number) => b.length >= n;
  switch (mime) {
    case 'image/png':
      // IHDR is the first chunk: width and height at 16 and 20.
      return at(24) && b.toString('latin1', 12, 16) === 'IHDR' ? { width: b.readUInt32BE(16), height: b.readUInt32BE(20) } : null;
    case 'image/gif':
      return at(10) ? { width: b.readUInt16LE(6), height: b.readUInt16LE(8) } : null;
    case 'image/bmp': {
      if (!at(26)) return null;
      // A BITMAPCOREHEADER (12 bytes) has 16-bit sizes; the later headers 32-bit, a negative height top-down.
      if (b.readUInt32LE(14) === 12) return { width: b.readUInt16LE(18), height: b.readUInt16LE(20) };
      return { width: Math.abs(b.readInt32LE(18)), height: Math.abs(b.readInt32LE(22)) };
    }
    case 'image/webp': {
      const chunk = at(16) ? b.toString('latin1', 12, 16) : '';
      if (chunk === 'VP8X' && at(30)) return { width: 1 + b.readUIntLE(24, 3), height: 1 + b.readUIntLE(27, 3) };
      if (chunk === 'VP8L' && at(25)) {
        const bits = b.readUInt32LE(21);
        return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >>> 14) & 0x3fff) };
      }
      if (chunk === 'VP8 ' && at(30)) return { width: b.readUInt16LE(26) & 0x3fff, height: b.readUInt16LE(28) & 0x3fff };
      return null;
    }
    case 'image/jpeg': {
      // Walk the segments to the first start-of-frame marker (C0-CF but C4, C8, CC).
      let i = 2;
      while (i + 9 <= b.length) {
        if (b[i] !== 0xff) return null;
        const marker = b[i + 1]!;
        if (marker === 0xff) {
          i++;
          continue;
        }
        if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
          return { width: b.readUInt16BE(i + 7), height: b.readUInt16BE(i + 5) };
        }
        if (marker === 0xd8 || (marker >= 0xd0 && marker <= 0xd7) || marker === 0x01) {
          i += 2;
          continue;
        }
        i += 2 + b.readUInt16BE(i + 2);
      }
      return null;
    }
    default:
      return null;
  }
}

/**
 * Checks one base64 image (whitespace inside is ignored): a 400 naming `param` when it is not
 * base64, is empty, decodes to more than `maxBytes`, or is not PNG, JPEG, GIF, WebP or BMP.
 */
export function checkImage(b64: string, maxBytes: number, param = 'images'): CheckedImage {
  const text = /\s/.test(b64) ? b64.replace(/\s+/g, '') : b64;
  if (text.length === 0) throw Errors.badRequest('an image is empty', { param });
  if (!isBase64(text)) throw Errors.badRequest('an image is not valid base64 data', { param });
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const bytes = Math.floor((text.length * 3) / 4) - padding;
  if (bytes > maxBytes) throw Errors.badRequest(`an image is ${bytes} bytes; the limit is ${maxBytes} (the engine's maxImageBytes)`, { param });
  const mime = imageMimeType(text);
  if (mime === 'application/octet-stream') throw Errors.badRequest('an image is not a PNG, JPEG, GIF, WebP or BMP file', { param });
  const size = imageDimensions(Buffer.from(text, 'base64'), mime);
  if (!size || size.width === 0 || size.height === 0) throw Errors.badRequest(`an image's ${mime.slice(6).toUpperCase()} header gives no size`, { param });
  const { width, height } = size;
  if (width > IMAGE_BOUNDS.side || height > IMAGE_BOUNDS.side || width * height > IMAGE_BOUNDS.pixels) {
    throw Errors.badRequest(
      `an image of ${width} × ${height} pixels is over the limit of ${IMAGE_BOUNDS.side} pixels a side and ${IMAGE_BOUNDS.pixels / 1e6} megapixels`,
      { param },
    );
  }
  return { mime, bytes, width, height };
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
