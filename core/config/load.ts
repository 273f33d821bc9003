/**
 * Reads the configuration once: the shipped defaults (`config/lia.default.yaml`), then the file
 * cosmiconfig finds (or `--config`), then `LIA_*` environment variables, then `lia serve` flags.
 * The merged result is validated against {@link ConfigSchema} and frozen. This module is the only
 * reader of `process.env` for core settings.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { cosmiconfig, defaultLoaders } from 'cosmiconfig';
import { Value } from '@sinclair/typebox/value';
import { projectPath } from '../paths.js';
import { ConfigSchema, SETTINGS, type Config } from './schema.js';

/** A configuration that cannot be used. The CLI prints the message and exits with code 2. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly exitCode = 2;
}

/** Where config files are looked for, in order, in the working directory. */
export const SEARCH_PLACES = [
  'package.json',
  '.liarc',
  '.liarc.json',
  '.liarc.yaml',
  '.liarc.yml',
  '.liarc.js',
  '.liarc.mjs',
  'lia.config.yaml',
  'lia.config.yml',
  'lia.config.json',
  'lia.config.js',
  'lia.config.mjs',
];

export const DEFAULTS_FILE = projectPath('config', 'lia.default.yaml');

export interface LoadConfigOptions {
  /** Explicit config file (`--config`, `LIA_CONFIG`). */
  configFile?: string;
  /** Directory to search; defaults to the working directory. */
  cwd?: string;
  /** Environment to read; defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Values from command-line flags, by setting key. */
  flags?: Partial<Record<string, string>>;
}

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Merges `over` onto `base`; plugin entries merge per plugin so a user can flip one flag. */
function merge(base: Raw, over: Raw): Raw {
  const out: Raw = { ...base };
  for (const [k, v] of Object.entries(over)) {
    const b = out[k];
    if (k === 'plugins' && isObject(b) && isObject(v)) {
      const plugins: Raw = { ...b };
      for (const [name, entry] of Object.entries(v)) {
        const prev = plugins[name];
        plugins[name] = isObject(prev) && isObject(entry) ? { ...prev, ...entry } : entry;
      }
      out[k] = plugins;
    } else {
      out[k] = v;
    }
  }
  return out;
}

/** Turns a string from env or a flag into the type the schema wants for `key`. */
function coerce(key: string, value: string, origin: string): unknown {
  if (key === 'backends') return backendChoices(value, origin);
  if (key === 'corsOrigins')
    return value
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean);
  // Every setting whose default is a number is an integer (port, limits, timeouts).
  const numeric = typeof SETTINGS.find((s) => s.key === key)?.default === 'number';
  if (!numeric) return value;
  if (!/^\d+$/.test(value)) throw new ConfigError(`${origin}: "${key}" must be an integer, got "${value}"`);
  return Number(value);
}

/** `gguf=backend-llama-cpp,onnx=transformers` → `{ gguf: 'backend-llama-cpp', onnx: 'transformers' }`. */
function backendChoices(value: string, origin: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of value
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([^=\s]+)\s*=\s*(\S+)$/.exec(pair);
    if (!m) throw new ConfigError(`${origin}: "backends" entries are FORMAT=BACKEND separated by commas, got "${pair}"`);
    out[m[1]!] = m[2]!;
  }
  return out;
}

async function readDefaults(): Promise<Raw> {
  const loaded: unknown = await defaultLoaders['.yaml'](DEFAULTS_FILE, await readFile(DEFAULTS_FILE, 'utf8'));
  if (!isObject(loaded)) throw new ConfigError(`${DEFAULTS_FILE}: the shipped defaults are not an object`);
  const defaults: Raw = { ...loaded };
  for (const s of SETTINGS) if (defaults[s.key] === undefined) defaults[s.key] = s.default;
  return defaults;
}

async function readUserFile(options: LoadConfigOptions): Promise<{ config: Raw; file: string } | null> {
  const explorer = cosmiconfig('lia', { searchPlaces: SEARCH_PLACES, searchStrategy: 'none' });
  try {
    const result = options.configFile
      ? await explorer.load(path.resolve(options.cwd ?? process.cwd(), options.configFile))
      : await explorer.search(options.cwd ?? process.cwd());
    if (!result || result.isEmpty) return result ? { config: {}, file: result.filepath } : null;
    if (!isObject(result.config)) throw new ConfigError(`${result.filepath}: the configuration must be an object`);
    return { config: result.config, file: result.filepath };
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const file = options.configFile ?? 'configuration file';
    throw new ConfigError(`${file}: cannot read it: ${(err as Error).message}`);
  }
}

/** The first key that is not in the schema, as a dotted path, or null. */
function unknownKey(config: Raw): string | null {
  const known = Object.keys(ConfigSchema.properties);
  for (const k of Object.keys(config)) if (!known.includes(k)) return k;
  const plugins = config['plugins'];
  if (isObject(plugins)) {
    for (const [name, entry] of Object.entries(plugins)) {
      if (!isObject(entry)) continue;
      for (const k of Object.keys(entry)) if (!['enabled', 'module', 'options'].includes(k)) return `plugins.${name}.${k}`;
    }
  }
  return null;
}

/** Describes the first schema violation with the key path and the file it came from. */
function describeErrors(config: Raw, file: string): string {
  const unknown = unknownKey(config);
  if (unknown) return `${file}: unknown key "${unknown}" (known keys: ${Object.keys(ConfigSchema.properties).join(', ')})`;
  const first = [...Value.Errors(ConfigSchema, config)][0];
  if (!first) return `${file}: invalid configuration`;
  const key = first.path.replace(/^\//, '').replace(/\//g, '.') || '(root)';
  return `${file}: "${key}" ${first.message.toLowerCase()} (got ${JSON.stringify(first.value)})`;
}

/** Loads, merges, validates and freezes the configuration. Throws {@link ConfigError}. */
export async function loadConfig(options: LoadConfigOptions = {}): Promise<Config> {
  const env = options.env ?? process.env;
  const defaults = await readDefaults();
  const configFile = options.configFile ?? env['LIA_CONFIG'];
  const user = await readUserFile({ ...options, configFile });
  let merged = user ? merge(defaults, user.config) : defaults;
  const origin = user?.file ?? 'configuration';

  if (user) {
    // Validate the file on its own first so an error names the file, not the merged result.
    const check = merge(defaults, user.config);
    if (!Value.Check(ConfigSchema, check)) throw new ConfigError(describeErrors(check, user.file));
  }
  for (const s of SETTINGS) {
    const v = env[s.env];
    if (v !== undefined && v !== '') merged = { ...merged, [s.key]: coerce(s.key, v, `environment variable ${s.env}`) };
  }
  for (const s of SETTINGS) {
    const v = options.flags?.[s.key];
    if (v !== undefined) merged = { ...merged, [s.key]: coerce(s.key, v, `flag ${s.flag ?? s.key}`) };
  }
  if (!Value.Check(ConfigSchema, merged)) throw new ConfigError(describeErrors(merged, origin));

  const dataDir = path.resolve(options.cwd ?? process.cwd(), String(merged['dataDir']));
  const config = { ...(merged as Raw), dataDir, source: user?.file ?? null } as Config;
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (isObject(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
