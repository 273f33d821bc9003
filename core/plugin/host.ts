/**
 * The plugin host: turns the `plugins` map of the config into loaded, validated plugins in
 * dependency order, and registers them on the app. Every failure here is a {@link ConfigError}
 * (exit code 2) that names the plugin, the key and the file.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { Value } from '@sinclair/typebox/value';
import { ConfigError } from '../config/load.js';
import type { Config, PluginEntry } from '../config/schema.js';
import type { LiaPlugin } from './define.js';
import type { Hooks } from './hooks.js';

const BUILTIN_DIR = new URL('../../plugins/', import.meta.url);

export interface LoadedPlugin {
  plugin: LiaPlugin;
  options: Record<string, unknown>;
  /** Where it came from: `built-in` or the module specifier. */
  origin: string;
}

function entryOf(entry: PluginEntry): { enabled: boolean; module?: string; options: Record<string, unknown> } {
  if (typeof entry === 'boolean') return { enabled: entry, options: {} };
  return { enabled: entry.enabled ?? true, module: entry.module, options: { ...(entry.options ?? {}) } };
}

function where(config: Config): string {
  return config.source ?? 'the default configuration';
}

/** Finds the module of a plugin: built-in folder, a path relative to the config, or a package. */
function resolveSpecifier(name: string, module: string | undefined, config: Config): string {
  if (!module) {
    for (const ext of ['index.js', 'index.ts']) {
      const url = new URL(`${name}/${ext}`, BUILTIN_DIR);
      if (existsSync(url)) return url.href;
    }
    throw new ConfigError(`${where(config)}: plugin "${name}" cannot be found (no built-in plugin has that name; set "plugins.${name}.module")`);
  }
  const base = config.source ? path.dirname(config.source) : process.cwd();
  if (module.startsWith('.') || path.isAbsolute(module)) {
    const file = path.resolve(base, module);
    if (!existsSync(file)) throw new ConfigError(`${where(config)}: plugin "${name}" cannot be found at "plugins.${name}.module" = ${module}`);
    return pathToFileURL(file).href;
  }
  try {
    return pathToFileURL(createRequire(path.join(base, 'noop.js')).resolve(module)).href;
  } catch {
    throw new ConfigError(`${where(config)}: plugin "${name}" cannot be found: package "${module}" is not installed`);
  }
}

function isPlugin(value: unknown): value is LiaPlugin {
  return (
    typeof value === 'object' && value !== null &&
    typeof (value as LiaPlugin).name === 'string' &&
    typeof (value as LiaPlugin).setup === 'function'
  );
}

function envOverrides(plugin: LiaPlugin, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [variable, key] of Object.entries(plugin.env ?? {})) {
    const raw = env[variable];
    if (raw === undefined || raw === '') continue;
    try {
      out[key] = JSON.parse(raw);
    } catch {
      out[key] = raw;
    }
  }
  return out;
}

function validateOptions(plugin: LiaPlugin, options: Record<string, unknown>, config: Config): Record<string, unknown> {
  if (!plugin.options) {
    const keys = Object.keys(options);
    if (keys.length > 0) throw new ConfigError(`${where(config)}: unknown key "plugins.${plugin.name}.options.${keys[0]}" (the plugin takes no options)`);
    return {};
  }
  const withDefaults = Value.Default(plugin.options, structuredClone(options)) as Record<string, unknown>;
  // Numbers from the environment arrive as numbers through JSON.parse; strings stay strings.
  const first = [...Value.Errors(plugin.options, withDefaults)][0];
  if (first) {
    const key = first.path.replace(/^\//, '').replace(/\//g, '.');
    const known = Object.keys(plugin.options.properties);
    const unknownKey = Object.keys(withDefaults).find((k) => !known.includes(k));
    if (unknownKey) throw new ConfigError(`${where(config)}: unknown key "plugins.${plugin.name}.options.${unknownKey}" (known: ${known.join(', ')})`);
    throw new ConfigError(`${where(config)}: "plugins.${plugin.name}.options${key ? '.' + key : ''}" ${first.message.toLowerCase()}`);
  }
  return withDefaults;
}

/** Orders plugins so each comes after its dependencies; a missing one names both plugins. */
function order(plugins: LoadedPlugin[], config: Config): LoadedPlugin[] {
  const byName = new Map(plugins.map((p) => [p.plugin.name, p]));
  const done = new Set<string>();
  const visiting = new Set<string>();
  const out: LoadedPlugin[] = [];
  const visit = (p: LoadedPlugin): void => {
    if (done.has(p.plugin.name)) return;
    if (visiting.has(p.plugin.name)) throw new ConfigError(`${where(config)}: plugins depend on each other in a cycle through "${p.plugin.name}"`);
    visiting.add(p.plugin.name);
    for (const dep of p.plugin.dependencies ?? []) {
      const d = byName.get(dep);
      if (!d) throw new ConfigError(`${where(config)}: plugin "${p.plugin.name}" needs plugin "${dep}", which is not enabled`);
      visit(d);
    }
    visiting.delete(p.plugin.name);
    done.add(p.plugin.name);
    out.push(p);
  };
  for (const p of plugins) visit(p);
  return out;
}

/** Imports and validates every enabled plugin. */
export async function loadPlugins(config: Config, env: NodeJS.ProcessEnv = process.env): Promise<LoadedPlugin[]> {
  const loaded: LoadedPlugin[] = [];
  for (const [name, raw] of Object.entries(config.plugins)) {
    const entry = entryOf(raw);
    if (!entry.enabled) continue;
    const specifier = resolveSpecifier(name, entry.module, config);
    let mod: { default?: unknown };
    try {
      mod = (await import(specifier)) as { default?: unknown };
    } catch (err) {
      throw new ConfigError(`${where(config)}: plugin "${name}" failed to load: ${(err as Error).message}`);
    }
    const plugin = mod.default;
    if (!isPlugin(plugin)) throw new ConfigError(`${where(config)}: "${entry.module ?? name}" is not a LIA plugin (its default export must come from definePlugin)`);
    if (plugin.name !== name) throw new ConfigError(`${where(config)}: "plugins.${name}" loads a plugin named "${plugin.name}"; use that name as the key`);
    const options = validateOptions(plugin, { ...entry.options, ...envOverrides(plugin, env) }, config);
    loaded.push({ plugin, options, origin: entry.module ?? 'built-in' });
  }
  return order(loaded, config);
}

/** Registers loaded plugins, each in its own encapsulated context, in order. */
export async function registerPlugins(app: FastifyInstance, plugins: LoadedPlugin[], config: Config, hooks: Hooks): Promise<void> {
  for (const { plugin, options } of plugins) {
    const log = app.log.child(plugin.service ? { plugin: plugin.name, svc: plugin.service } : { plugin: plugin.name });
    await app.register(async (instance) => {
      await plugin.setup(instance, { name: plugin.name, options, config, hooks, log });
      hooks.backends.claim(plugin.name);
    });
  }
}
