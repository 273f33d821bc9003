/**
 * The console's built files (`dist/webui/`, written by the Vite build), read once into memory
 * with the `.br` and `.gz` copies the build wrote beside them. Hashed files under `assets/` are
 * served as immutable for a year; everything else (`index.html`, the icon) is `no-cache` and
 * revalidated by ETag, so a new build is picked up on the next load.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export interface Asset {
  type: string;
  etag: string;
  immutable: boolean;
  identity: Buffer;
  br?: Buffer;
  gzip?: Buffer;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Cache-Control of content-hashed files: one year, never revalidated. */
export const IMMUTABLE = 'public, max-age=31536000, immutable';
/** Cache-Control of the page and other unhashed files: always revalidated (ETag). */
export const REVALIDATE = 'no-cache';

async function walk(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await walk(dir, rel)));
    else if (e.isFile() && !/\.(br|gz)$/.test(e.name)) out.push(rel);
  }
  return out;
}

async function maybe(file: string): Promise<Buffer | undefined> {
  return readFile(file).catch(() => undefined);
}

/** Loads every built file under `dir`, keyed by its path relative to it; null when `dir` is missing. */
export async function loadAssets(dir: string): Promise<Map<string, Asset> | null> {
  let files: string[];
  try {
    files = await walk(dir);
  } catch {
    return null;
  }
  const assets = new Map<string, Asset>();
  for (const rel of files) {
    const full = path.join(dir, rel);
    const identity = await readFile(full);
    assets.set(rel, {
      type: TYPES[path.extname(rel)] ?? 'application/octet-stream',
      etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
      immutable: rel.startsWith('assets/'),
      identity,
      br: await maybe(`${full}.br`),
      gzip: await maybe(`${full}.gz`),
    });
  }
  return assets;
}

/** The best encoding the client accepts among those the asset has. */
export function pickEncoding(asset: Asset, acceptEncoding: string | undefined): { encoding: 'br' | 'gzip' | null; body: Buffer } {
  const accepted = new Set(
    String(acceptEncoding ?? '')
      .split(',')
      .map((s) => s.trim().split(';'))
      .filter(([, q]) => q === undefined || !/^q=0(\.0*)?$/.test(q.trim()))
      .map(([name]) => (name ?? '').toLowerCase()),
  );
  if (asset.br && accepted.has('br')) return { encoding: 'br', body: asset.br };
  if (asset.gzip && accepted.has('gzip')) return { encoding: 'gzip', body: asset.gzip };
  return { encoding: null, body: asset.identity };
}
