/**
 * The plugin contract. A LIA plugin is a module whose default export is the value of
 * {@link definePlugin}. Core loads only the plugins the config enables, validates each one's
 * options against the schema it declares, checks its dependencies, and calls `setup` inside its
 * own encapsulated Fastify context: routes it adds disappear when it is disabled, and decorators
 * it adds stay private. Plugins reach each other only through {@link Hooks}.
 *
 * @example
 * ```ts
 * import { Type } from '@sinclair/typebox'
 * import { definePlugin } from 'lia/core'
 *
 * export default definePlugin({
 *   name: 'hello',
 *   options: Type.Object({ greeting: Type.String({ default: 'hi' }) }),
 *   async setup(app, ctx) {
 *     app.get('/api/hello', async () => ({ message: ctx.options.greeting }))
 *   },
 * })
 * ```
 *
 * @module
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Static, TObject } from '@sinclair/typebox';
import type { Config } from '../config/schema.js';
import type { Hooks } from './hooks.js';

export interface PluginContext<Options> {
  /** The plugin's name as the config lists it. */
  readonly name: string;
  /** Options after validation, with schema defaults applied and env overrides merged. */
  readonly options: Readonly<Options>;
  /** The whole validated configuration (read-only). */
  readonly config: Config;
  readonly hooks: Hooks;
  /** A child logger bound to the plugin (and to its service, see {@link LiaPlugin.service}). */
  readonly log: FastifyBaseLogger;
}

export interface LiaPlugin<S extends TObject = TObject> {
  /** Unique name; built-in plugins are named after their folder under `plugins/`. */
  readonly name: string;
  /** One line for `lia plugins` and the docs. */
  readonly description: string;
  /** Plugins that must be enabled (and are set up) before this one. */
  readonly dependencies?: readonly string[];
  /** The service this plugin implements, if any; its log lines are filed under it. */
  readonly service?: string;
  /** TypeBox schema of the options; unknown keys are rejected. */
  readonly options?: S;
  /**
   * Environment variables that override options: `{ LIA_KEEP_ALIVE: 'keepAlive' }`. Values are
   * parsed as JSON when they parse, else taken as strings, then validated with the schema.
   */
  readonly env?: Readonly<Record<string, string>>;
  setup(app: FastifyInstance, ctx: PluginContext<Static<S>>): Promise<void> | void;
}

/** Declares a plugin; an identity function that gives `setup` its typed options. */
export function definePlugin<S extends TObject>(plugin: LiaPlugin<S>): LiaPlugin<S> {
  return plugin;
}
