/**
 * The appliance's version, read once from package.json (`/health`, `/system/status`, `lia --version`).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { projectPath } from './paths.js';

const pkg = JSON.parse(readFileSync(projectPath('package.json'), 'utf8')) as { version: string };

/** The package version, e.g. `0.1.0`. */
export const VERSION: string = pkg.version;
