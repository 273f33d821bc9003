/**
 * The data directory the CLI reads the key and CA from when talking to a local appliance:
 * `LIA_DATA_DIR`, else the default of `core/config/schema.ts`.
 *
 * @module
 */
import { SETTINGS } from '../config/schema.js';

export function dataDirFromEnv(env: NodeJS.ProcessEnv): string {
  return env['LIA_DATA_DIR'] || String(SETTINGS.find((s) => s.key === 'dataDir')?.default);
}
