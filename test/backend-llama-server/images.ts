/**
 * Images for the vision tests, made here rather than stored: a PNG of one colour (zlib and a CRC
 * table; no image library), and base64 helpers.
 *
 * @module
 */
import { deflateSync } from 'node:zlib';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Buffer): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}

/** An RGB PNG of `width` x `height` pixels of one colour. */
export function solidPng(width: number, height: number, rgb: [number, number, number] = [200, 40, 40]): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // RGB
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: width }, () => rgb).flat())]);
  const pixels = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A PNG signature and header followed by bytes that are no image data: passes a first-bytes check, fails to decode. */
export function corruptPng(): Buffer {
  return Buffer.concat([solidPng(32, 32).subarray(0, 33), Buffer.from('this is not a compressed image stream at all'.repeat(4))]);
}

/**
 * The first bytes of an image of each format taken, declaring `width` × `height` pixels and holding
 * no pixels: what the dimension bounds read (a BMP of 54 bytes may declare 26,000 × 26,000).
 */
export function imageHeader(format: 'png' | 'gif' | 'bmp' | 'webp' | 'jpeg', width: number, height: number): Buffer {
  switch (format) {
    case 'png': {
      const header = Buffer.alloc(13);
      header.writeUInt32BE(width, 0);
      header.writeUInt32BE(height, 4);
      header[8] = 8;
      header[9] = 2;
      return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header)]);
    }
    case 'gif': {
      const b = Buffer.from('GIF89a\0\0\0\0\0\0\0', 'latin1');
      b.writeUInt16LE(width, 6);
      b.writeUInt16LE(height, 8);
      return b;
    }
    case 'bmp': {
      const b = Buffer.alloc(54);
      b.write('BM', 0, 'latin1');
      b.writeUInt32LE(54, 2);
      b.writeUInt32LE(54, 10);
      b.writeUInt32LE(40, 14); // BITMAPINFOHEADER
      b.writeInt32LE(width, 18);
      b.writeInt32LE(height, 22);
      b.writeUInt16LE(1, 26);
      b.writeUInt16LE(24, 28);
      return b;
    }
    case 'webp': {
      const b = Buffer.alloc(30);
      b.write('RIFF', 0, 'latin1');
      b.writeUInt32LE(22, 4);
      b.write('WEBPVP8X', 8, 'latin1');
      b.writeUInt32LE(10, 16);
      b.writeUIntLE(width - 1, 24, 3);
      b.writeUIntLE(height - 1, 27, 3);
      return b;
    }
    case 'jpeg': {
      // SOI, an APP0 segment, then a baseline start-of-frame with the size.
      const app0 = Buffer.from([0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01, 0x01, 0, 0, 1, 0, 1, 0, 0]);
      const sof = Buffer.from([0xff, 0xc0, 0x00, 0x11, 0x08, 0, 0, 0, 0, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
      sof.writeUInt16BE(height, 5);
      sof.writeUInt16BE(width, 7);
      return Buffer.concat([Buffer.from([0xff, 0xd8]), app0, sof]);
    }
  }
}
