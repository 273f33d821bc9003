/**
 * The plugin contract. A LIA plugin is a module whose default export is the value of
 * {@link definePlugin}: a Fastify plugin (wrapped by `fastify-plugin`, so its name and dependencies
 * are Fastify metadata) that carries its LIA declaration. Core loads only the plugins the config
 * enables, checks the plugin API version, validates the options against the schema the plugin
 * declares, and calls `setup` inside the plugin's own encapsulated Fastify context: routes it adds
 * disappear when it is disabled, and decorators it adds stay private. Plugins reach each other only
 * through {@link Hooks}.
 *
 * @example
 * ```js
 * import { definePlugin } from 'lia/plugin'
 * import { Type } from 'lia/utils'
 *
 * export default definePlugin({
 *   name: 'hello',
 *   apiVersion: 2,
 *   description: 'Says hello',
 *   options: Type.Object({ greeting: Type.String({ default: 'hi' }) }),
 *   async setup(app, ctx) {
 *     app.get('/api/hello', { config: { scope: 'models:read' } }, async () => ({ message: ctx.options.greeting }))
 *   },
 * })
 * ```
 *
 * @module
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import type { Static, TObject } from '@sinclair/typebox';
import type { CliCommand } from '../cli/types.js';
import type { Config } from '../config/schema.js';
import type { HookName, Hooks } from './hooks.js';
import type { ServiceDeclaration } from '../services/registry.js';

/**
 * The major version of the plugin API this core implements. A plugin declares the version it was
 * written against; a different major stops the start (exit 2). Additions keep the major; a removal
 * or an incompatible change raises it.
 */
export const PLUGIN_API_VERSION = 2;

export interface PluginContext<Options> {
  /** The plugin's name as the config lists it. */
  readonly name: string;
  /** Options after validation, with schema defaults applied and env overrides merged. */
  readonly options: Readonly<Options>;
  /** The whole validated configuration (read-only). */
  readonly config: Config;
  readonly hooks: Hooks;
  /** A child logger bound to the plugin (and to its service, see {@link PluginSpec.services}). */
  readonly log: FastifyBaseLogger;
}

export interface PluginSpec<S extends TObject = TObject> {
  /** Unique name, the key under `plugins:` in the config. Built-in plugins are named after their folder. */
  readonly name: string;
  /** The plugin API major version the plugin was written for ({@link PLUGIN_API_VERSION}). */
  readonly apiVersion: number;
  /** One line for `lia plugins` and the docs. */
  readonly description: string;
  /** Plugins that must be enabled and set up before this one (Fastify checks them at registration). */
  readonly dependencies?: readonly string[];
  /**
   * The hooks this plugin fills: sole hooks of {@link Hooks} (`inference`, `models`, `tls`, ...) or
   * extensions it offers to other plugins (`CustomHooks`). Core refuses a start where two enabled
   * plugins provide the same one (exit 2, naming both), and a setup that did not provide what it
   * declares. Defaults to none.
   */
  readonly provides?: readonly HookName[];
  /**
   * The hooks this plugin reads and cannot work without. A start where no enabled plugin provides
   * one stops with exit code 2, naming this plugin, the hook and the plugin that provides it.
   * Defaults to none.
   */
  readonly requires?: readonly HookName[];
  /**
   * The hooks this plugin reads when they are there (with `maybe()`) and does without otherwise;
   * documentation for `lia plugins` and the reader, not checked. Defaults to none.
   */
  readonly uses?: readonly HookName[];
  /**
   * The services this plugin runs (`svc-inference`, ...): each one is listed by `/health` and
   * `/system/services`, started in the order the registry's rule gives (see
   * `ServiceRegistry`) and stopped in reverse, and its setup attaches the role with
   * `ctx.hooks.services.implement(name, { start, stop })`. A name another enabled plugin (or core)
   * declares stops the start (exit 2, naming both); a declared service the setup does not
   * implement stops it too. Defaults to none.
   */
  readonly services?: readonly ServiceDeclaration[];
  /** The service the plugin's log lines are filed under. Defaults to the first of {@link PluginSpec.services}. */
  readonly service?: string;
  /** TypeBox schema of the options; unknown keys are rejected. No schema: the plugin takes none. */
  readonly options?: S;
  /**
   * Environment variables that override options: `{ LIA_KEEP_ALIVE: 'keepAlive' }`. Values are
   * parsed as JSON when they parse, else taken as strings, then validated with the schema.
   */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * CLI commands the plugin adds to `lia` (listed by `lia --help` only while the plugin is
   * enabled). A function, so that the command modules load only when the CLI runs.
   */
  readonly commands?: () => Promise<readonly CliCommand[]> | readonly CliCommand[];
  /** Adds the plugin's routes and hook contributions. Runs once, in dependency order. */
  setup(app: FastifyInstance, ctx: PluginContext<Static<S>>): Promise<void> | void;
}

/** What core passes every plugin through Fastify's plugin options. */
export interface PluginRuntime {
  /** Builds the context of one plugin: validated options, its logger. Throws ConfigError. */
  contextFor(spec: PluginSpec, app: FastifyInstance): PluginContext<Record<string, unknown>>;
  /** Called once a plugin's setup has finished (records, e.g., which plugin registered which backends). */
  setUp(name: string): void;
}

/** The key of the runtime in a plugin's Fastify options (a symbol: it cannot clash with user options). */
export const RUNTIME = Symbol.for('lia.plugin-runtime');

const SPEC = Symbol.for('lia.plugin-spec');

/** A plugin as core loads it: a Fastify plugin that knows its LIA declaration. */
export type LiaPlugin<S extends TObject = TObject> = FastifyPluginAsync<{ [RUNTIME]?: PluginRuntime }> & {
  readonly [SPEC]: PluginSpec<S>;
};

/**
 * Declares a plugin. Returns a Fastify plugin: registered by core (or by `@fastify/autoload` for
 * the built-in folder), it asks the runtime for its context and runs `setup` in its own
 * encapsulated context. Its name and dependencies are `fastify-plugin` metadata, so Fastify itself
 * refuses a plugin whose dependency was not registered first.
 */
export function definePlugin<S extends TObject>(spec: PluginSpec<S>): LiaPlugin<S> {
  const register: FastifyPluginAsync<{ [RUNTIME]?: PluginRuntime }> = async (app, opts) => {
    const runtime = opts[RUNTIME];
    if (!runtime) throw new Error(`plugin "${spec.name}" was registered without LIA's runtime; enable it in the config instead`);
    const ctx = runtime.contextFor(spec, app);
    await spec.setup(app, ctx);
    runtime.setUp(spec.name);
  };
  const plugin = fp(register, {
    name: spec.name,
    dependencies: [...(spec.dependencies ?? [])],
    fastify: '5.x',
    encapsulate: true,
  });
  return Object.assign(plugin, { [SPEC]: spec });
}

/** The declaration of a loaded plugin module, or null when it is not a LIA plugin. */
export function specOf(value: unknown): PluginSpec | null {
  if (typeof value !== 'function' && (typeof value !== 'object' || value === null)) return null;
  const spec = (value as { [SPEC]?: PluginSpec })[SPEC];
  if (!spec || typeof spec.name !== 'string' || typeof spec.setup !== 'function') return null;
  return spec;
}
