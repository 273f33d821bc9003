/**
 * The parts of a ranged blob download and their saved state. The state file (`<blob>-partial.json`
 * beside `<blob>-partial`) records, per part, how many bytes are on disk, so a download that a
 * restart interrupted resumes where it stopped.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { readFile, stat, writeFile } from 'node:fs/promises';

export interface Part {
  start: number;
  /** Inclusive. */
  end: number;
  /** Bytes received (what progress shows). */
  completed: number;
  /** Bytes on disk (what is saved for a resume). */
  written?: number;
}

interface PartState {
  digest: string;
  total: number;
  parts: Part[];
}

/** Splits `total` bytes into parts of at least `min` bytes, at most `max` parts. */
export function planParts(total: number, min: number, max: number): Part[] {
  if (total === 0) return [];
  const size = Math.max(min, Math.ceil(total / max));
  const parts: Part[] = [];
  for (let start = 0; start < total; start += size) parts.push({ start, end: Math.min(total, start + size) - 1, completed: 0 });
  return parts;
}

/** Where the parts of `blob` (its final path) and their state are kept. */
export function partFiles(blob: string): { partial: string; state: string } {
  return { partial: `${blob}-partial`, state: `${blob}-partial.json` };
}

/**
 * The saved parts of a download of `digest` (`total` bytes), or null when there is nothing
 * usable: no state, another blob's state, or a partial file of the wrong size.
 */
export async function loadParts(blob: string, digest: string, total: number): Promise<Part[] | null> {
  const files = partFiles(blob);
  // The usual case, a new download, answered without a trip through the thread pool (its first
  // request goes out sooner).
  if (!existsSync(files.state)) return null;
  try {
    const state = JSON.parse(await readFile(files.state, 'utf8')) as PartState;
    const size = (await stat(files.partial)).size;
    if (state.digest !== digest || state.total !== total || size !== total || !Array.isArray(state.parts)) return null;
    return state.parts.map((p) => ({ start: p.start, end: p.end, completed: Math.max(0, Math.min(p.completed, p.end - p.start + 1)) }));
  } catch {
    return null;
  }
}

/** Saves how much of each part is on disk; a failure only costs a resume, so it is ignored. */
export async function saveParts(blob: string, digest: string, total: number, parts: readonly Part[]): Promise<void> {
  const state: PartState = { digest, total, parts: parts.map((p) => ({ start: p.start, end: p.end, completed: p.written ?? 0 })) };
  await writeFile(partFiles(blob).state, JSON.stringify(state)).catch(() => undefined);
}
