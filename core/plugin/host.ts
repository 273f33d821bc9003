/**
 * The plugin host. Before anything is set up it resolves every plugin the config enables (the
 * built-in folder, a path relative to the config file, or an npm package resolved with ESM rules),
 * imports it, checks its plugin API version, validates its options, checks that its
 * dependencies are enabled and that every hook it `requires` has a provider: every failure is a
 * {@link ConfigError} (exit code 2) that names the plugin and what to do, raised before any
 * plugin has touched the disk or the network.
 *
 * Registration then goes through Fastify: the built-in folder is loaded by `@fastify/autoload`,
 * filtered by the config, which orders the plugins by their `fastify-plugin` dependencies; third-
 * party plugins follow in the order the config lists them (Fastify refuses one whose dependency
 * was not registered before it). avvio, under Fastify, runs each plugin's setup in turn.
 *
 * @module
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autoload from '@fastify/autoload';
import type { FastifyInstance } from 'fastify';
import { Value } from '@sinclair/typebox/value';
import { resolve as resolveEsm } from 'import-meta-resolve';
import { ConfigError } from '../config/load.js';
import type { Config, PluginEntry } from '../config/schema.js';
import { PLUGIN_API_VERSION, RUNTIME, specOf, type LiaPlugin, type PluginContext, type PluginRuntime, type PluginSpec } from './define.js';
import { isProvided, type Hooks } from './hooks.js';

/**
 * What core itself needs from the plugins: TLS, since LIA serves only HTTPS. Checked with the
 * plugins' own `requires`, first.
 */
const CORE_REQUIRES: ReadonlyArray<{ hook: string; why: string }> = [{ hook: 'tls', why: 'no enabled plugin provides TLS ("tls"), and LIA serves only HTTPS' }];

const BUILTIN_DIR = new URL('../../plugins/', import.meta.url);
/** Built-in plugins are TypeScript when core runs from its sources (tests, LIA_FROM_SOURCE). */
const SOURCE_EXT = import.meta.url.endsWith('.ts') ? 'ts' : 'js';

export interface LoadedPlugin {
  spec: PluginSpec;
  /** The Fastify plugin the module exports. */
  plugin: LiaPlugin;
  options: Record<string, unknown>;
  /** Where it came from: `built-in` or the module specifier of the config. */
  origin: string;
}

function entryOf(entry: PluginEntry): { enabled: boolean; module?: string; options: Record<string, unknown> } {
  if (typeof entry === 'boolean') return { enabled: entry, options: {} };
  return { enabled: entry.enabled ?? true, module: entry.module, options: { ...(entry.options ?? {}) } };
}

function where(config: Config): string {
  return config.source ?? 'the default configuration';
}

/** The names of the plugins shipped in the built-in folder. */
export function builtInPath(name: string): string | null {
  const file = new URL(`${name}/index.${SOURCE_EXT}`, BUILTIN_DIR);
  return existsSync(file) ? fileURLToPath(file) : null;
}

/** Finds the module of a plugin: built-in folder, a path relative to the config, or a package. */
function resolveModule(name: string, module: string | undefined, config: Config): string {
  if (!module) {
    const file = builtInPath(name);
    if (!file)
      throw new ConfigError(
        `${where(config)}: plugin "${name}" cannot be found: no built-in plugin has that name; for a third-party plugin set "plugins.${name}.module" to its package name or path`,
      );
    return pathToFileURL(file).href;
  }
  const base = config.source ? path.dirname(config.source) : process.cwd();
  if (module.startsWith('.') || path.isAbsolute(module)) {
    const file = path.resolve(base, module);
    if (!existsSync(file)) throw new ConfigError(`${where(config)}: plugin "${name}" cannot be found at "plugins.${name}.module" = ${module}`);
    return pathToFileURL(file).href;
  }
  try {
    // ESM resolution (the package's "exports", "import" condition first) from the config's folder.
    return resolveEsm(module, pathToFileURL(path.join(base, 'lia.config.js')).href);
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === 'ERR_MODULE_NOT_FOUND' ? 'is not installed' : `cannot be resolved (${(err as Error).message})`;
    throw new ConfigError(`${where(config)}: plugin "${name}": package "${module}" ${why}; install it beside the configuration (npm install ${module})`);
  }
}

/** Parses `LIA_*` option overrides: JSON when they parse, strings otherwise. */
function envOverrides(spec: PluginSpec, env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [variable, key] of Object.entries(spec.env ?? {})) {
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

function validateOptions(spec: PluginSpec, options: Record<string, unknown>, config: Config): Record<string, unknown> {
  if (!spec.options) {
    const keys = Object.keys(options);
    if (keys.length > 0) throw new ConfigError(`${where(config)}: unknown key "plugins.${spec.name}.options.${keys[0]}" (the plugin takes no options)`);
    return {};
  }
  const withDefaults = Value.Default(spec.options, structuredClone(options)) as Record<string, unknown>;
  const first = [...Value.Errors(spec.options, withDefaults)][0];
  if (first) {
    const key = first.path.replace(/^\//, '').replace(/\//g, '.');
    const known = Object.keys(spec.options.properties);
    const unknownKey = Object.keys(withDefaults).find((k) => !known.includes(k));
    if (unknownKey) throw new ConfigError(`${where(config)}: unknown key "plugins.${spec.name}.options.${unknownKey}" (known: ${known.join(', ')})`);
    throw new ConfigError(`${where(config)}: "plugins.${spec.name}.options${key ? '.' + key : ''}" ${first.message.toLowerCase()}`);
  }
  return withDefaults;
}

async function importPlugin(name: string, url: string, module: string | undefined, config: Config): Promise<{ plugin: LiaPlugin; spec: PluginSpec }> {
  let mod: { default?: unknown };
  try {
    mod = (await import(url)) as { default?: unknown };
  } catch (err) {
    throw new ConfigError(`${where(config)}: plugin "${name}" failed to load: ${(err as Error).message}`);
  }
  const spec = specOf(mod.default);
  if (!spec)
    throw new ConfigError(`${where(config)}: "${module ?? name}" is not a LIA plugin (its default export must be the value of definePlugin from "lia/plugin")`);
  if (spec.name !== name) throw new ConfigError(`${where(config)}: "plugins.${name}" loads a plugin named "${spec.name}"; use that name as the key`);
  if (spec.apiVersion !== PLUGIN_API_VERSION) {
    throw new ConfigError(
      `${where(config)}: plugin "${name}" was written for plugin API version ${String(spec.apiVersion)}, and this LIA implements version ${PLUGIN_API_VERSION}; install a release of the plugin made for LIA's plugin API ${PLUGIN_API_VERSION}, or disable it`,
    );
  }
  return { plugin: mod.default as LiaPlugin, spec };
}

/** The enabled plugins' modules, imported and checked, without validating options (the CLI). */
export async function importEnabledPlugins(
  config: Config,
): Promise<Array<{ spec: PluginSpec; plugin: LiaPlugin; origin: string; options: Record<string, unknown> }>> {
  const out = [];
  for (const [name, raw] of Object.entries(config.plugins)) {
    const entry = entryOf(raw);
    if (!entry.enabled) continue;
    const url = resolveModule(name, entry.module, config);
    out.push({ ...(await importPlugin(name, url, entry.module, config)), origin: entry.module ?? 'built-in', options: entry.options });
  }
  return out;
}

/** Imports and checks every enabled plugin: API version, options, dependencies. Throws ConfigError. */
export async function loadPlugins(config: Config, env: NodeJS.ProcessEnv = process.env): Promise<LoadedPlugin[]> {
  const loaded = (await importEnabledPlugins(config)).map(({ spec, plugin, origin, options }) => ({
    spec,
    plugin,
    origin,
    options: validateOptions(spec, { ...options, ...envOverrides(spec, env) }, config),
  }));
  const enabled = new Set(loaded.map((p) => p.spec.name));
  for (const { spec } of loaded) {
    const missing = (spec.dependencies ?? []).find((d) => !enabled.has(d));
    if (missing)
      throw new ConfigError(
        `${where(config)}: plugin "${spec.name}" needs plugin "${missing}", which is not enabled; enable "${missing}" or disable "${spec.name}"`,
      );
  }
  await checkProviders(
    loaded.map((p) => p.spec),
    config,
  );
  return loaded;
}

/**
 * Checks the hooks the enabled plugins declare: each one `provides` has one provider, and each one
 * a plugin (or core) `requires` has a provider. A failure is a ConfigError naming the plugins on
 * both sides; for a missing provider, the built-in plugins that declare it are named.
 */
async function checkProviders(specs: readonly PluginSpec[], config: Config): Promise<void> {
  const providers = new Map<string, string>();
  for (const spec of specs) {
    for (const hook of spec.provides ?? []) {
      const other = providers.get(hook);
      if (other) throw new ConfigError(`${where(config)}: plugins "${other}" and "${spec.name}" both provide "${hook}"; enable only one of them`);
      providers.set(hook, spec.name);
    }
  }
  const missing = async (hook: string): Promise<string> => {
    const candidates = await builtInProvidersOf(hook, new Set(specs.map((s) => s.name)));
    return candidates.length > 0 ? `enable ${candidates.map((c) => `"${c}"`).join(' or ')}, which provides it` : 'enable a plugin that provides it';
  };
  for (const { hook, why } of CORE_REQUIRES) {
    if (!providers.has(hook)) throw new ConfigError(`${where(config)}: ${why}; ${await missing(hook)}`);
  }
  for (const spec of specs) {
    for (const hook of spec.requires ?? []) {
      if (providers.has(hook)) continue;
      throw new ConfigError(
        `${where(config)}: plugin "${spec.name}" requires "${hook}", which no enabled plugin provides; ${await missing(hook)}, or disable "${spec.name}"`,
      );
    }
  }
}

/** The built-in plugins outside `enabled` that declare they provide `hook` (read only to word an error). */
async function builtInProvidersOf(hook: string, enabled: ReadonlySet<string>): Promise<string[]> {
  const out: string[] = [];
  for (const name of readdirSync(BUILTIN_DIR).sort()) {
    const file = enabled.has(name) ? null : builtInPath(name);
    if (!file) continue;
    try {
      const spec = specOf(((await import(pathToFileURL(file).href)) as { default?: unknown }).default);
      if (spec?.provides?.includes(hook)) out.push(spec.name);
    } catch {
      // A built-in plugin that does not load here cannot be the advice.
    }
  }
  return out;
}

/**
 * Registers loaded plugins on the app: the built-in ones through `@fastify/autoload` (filtered to
 * the enabled ones, in dependency order), then the third-party ones in config order.
 */
export async function registerPlugins(app: FastifyInstance, plugins: LoadedPlugin[], config: Config, hooks: Hooks): Promise<void> {
  const byName = new Map(plugins.map((p) => [p.spec.name, p]));
  for (const { spec } of plugins) {
    for (const service of spec.services ?? []) {
      try {
        hooks.services.declare(service, spec.name);
      } catch (err) {
        throw new ConfigError(`${where(config)}: ${(err as Error).message}`);
      }
    }
  }
  const runtime: PluginRuntime = {
    contextFor(spec: PluginSpec, instance: FastifyInstance): PluginContext<Record<string, unknown>> {
      const loaded = byName.get(spec.name);
      if (!loaded) throw new ConfigError(`${where(config)}: plugin "${spec.name}" is registered but not enabled in the config`);
      const service = spec.service ?? spec.services?.[0]?.name;
      const log = instance.log.child(service ? { plugin: spec.name, svc: service } : { plugin: spec.name });
      return { name: spec.name, options: loaded.options, config, hooks, log };
    },
    setUp(name) {
      const spec = byName.get(name)?.spec;
      const unmet = (spec?.provides ?? []).find((hook) => !isProvided(hooks, hook));
      if (unmet) throw new Error(`plugin "${name}" declares that it provides "${unmet}", but its setup did not provide it`);
      const idle = (spec?.services ?? []).find((service) => !hooks.services.isImplemented(service.name));
      if (idle) throw new Error(`plugin "${name}" declares service "${idle.name}", but its setup did not implement it (hooks.services.implement)`);
    },
  };
  const builtIns = plugins.filter((p) => p.origin === 'built-in').map((p) => p.spec.name);
  if (builtIns.length > 0) {
    if (SOURCE_EXT === 'ts') process.env['FASTIFY_AUTOLOAD_TYPESCRIPT'] ??= '1'; // autoload refuses .ts files unless told a loader runs
    const enabled = new Set(builtIns);
    await app.register(autoload, {
      dir: fileURLToPath(BUILTIN_DIR),
      maxDepth: 1, // a plugin is its folder's index; its subfolders are its own modules
      dirNameRoutePrefix: false,
      matchFilter: (file: string) => enabled.has(file.split('/')[1] ?? '') && /\/index\.[jt]s$/.test(file),
      options: { [RUNTIME]: runtime },
    });
  }
  for (const p of plugins) {
    if (p.origin === 'built-in') continue;
    try {
      await app.register(p.plugin, { [RUNTIME]: runtime });
    } catch (err) {
      if ((err as { code?: string }).code !== 'FST_ERR_PLUGIN_DEPENDENCY_NOT_REGISTERED') throw err;
      throw new ConfigError(`${where(config)}: ${(err as Error).message}; list the plugin it depends on before it under "plugins"`);
    }
  }
}
