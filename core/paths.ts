/**
 * Where the project's own files are, whether the code runs from the TypeScript sources or from
 * the transpiled `dist/` tree: the nearest folder above this module whose package.json is LIA's.
 * Assets (the default config, the web page) are read from there, never relative to a module.
 *
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'lia') return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('cannot find the LIA project root above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

/** The project root (holds package.json, config/, plugins/). */
export const PROJECT_ROOT: string = findRoot();

/** A path inside the project, e.g. `projectPath('config', 'lia.default.yaml')`. */
export function projectPath(...parts: string[]): string {
  return path.join(PROJECT_ROOT, ...parts);
}
