/**
 * Model fixtures live in `../shared/models` beside the project (never in the repository).
 * A missing fixture fails the test with a message saying what is missing; tests never skip.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** `../shared/models` relative to the project root (override with LIA_TEST_MODELS). */
export const MODELS_DIR = process.env['LIA_TEST_MODELS'] ?? path.resolve(ROOT, '..', 'shared', 'models');

/** Absolute path of a fixture such as `gguf/stories260K.gguf`; throws when it is missing. */
export function fixture(relative: string): string {
  const file = path.join(MODELS_DIR, relative);
  if (!existsSync(file)) {
    throw new Error(`missing test fixture ${relative}: expected it at ${file} (the shared models folder must sit beside the project as ../shared/models)`);
  }
  return file;
}
