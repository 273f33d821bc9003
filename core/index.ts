/**
 * `lia/plugin`: the versioned plugin contract, and the module of core that every plugin imports,
 * built-in ones included. It holds what a plugin is ({@link definePlugin}, its spec and context),
 * the hooks it reaches the others through and the kinds of extension a third party implements,
 * the error registry, the streaming writers and the CLI command contract.
 *
 * The shapes those contracts carry (generation events, model descriptions, the services the
 * built-in plugins offer each other) are in `lia/plugin/contracts`, under the same version.
 * Helpers that are not part of the contract (formatting, atomic writes, paths, the CLI's HTTP
 * client, host tools, TypeBox) are in `lia/utils`, which follows no API version.
 *
 * Versioning: this module and `lia/plugin/contracts` follow {@link PLUGIN_API_VERSION}. Within
 * one major version, exports are only added; a removal or an incompatible change of a signature
 * raises the major, and core refuses plugins written for another major at load (exit code 2).
 * `etc/lia-plugin.api.md` and `etc/lia-plugin-contracts.api.md` record the surface; `npm run
 * api:check` fails when it changes without them.
 *
 * @module
 */
import './http/route-config.js';
export { definePlugin, PLUGIN_API_VERSION, type LiaPlugin, type PluginContext, type PluginSpec } from './plugin/define.js';
export { SoleHook, Slot, Registry, Extensions, type Hooks, type BannerSection, type ErrorFormat, type CustomHooks } from './plugin/hooks.js';
export type { BackendRegistry } from './plugin/backend-registry.js';
export type { ServiceRegistry, ServiceRole, ServiceDeclaration } from './services/registry.js';
export type { LogHub } from './logging.js';
export { AppError, Errors, defineError, isAppError, type AppErrorOptions, type EngineCrash, type ErrorFactory } from './errors.js';
export { startNdjson } from './streaming/ndjson.js';
export { startSse, type SseOptions } from './streaming/sse.js';
export { primed } from './streaming/primed.js';
export { clientGone, pump, type StreamFrames, type StreamWriter } from './streaming/pump.js';
export { currentPrincipal } from './http/auth.js';
export type { Scope } from './http/auth.js';
export type { Config } from './config/schema.js';
export type { Principal, AuthResult, AuthStrategy } from './contracts/auth.js';
export type { InferenceBackend, FormatHandler, LoadedModel } from './contracts/backend.js';
export type { GpuProvider } from './contracts/host.js';
export type { ModelSource } from './contracts/model-store.js';
export type { RequestObserver, InferenceObserver } from './contracts/observe.js';
export { CliError, isCliError, type CliCommand, type CliIO, type CliArgs } from './cli/types.js';
export type { ApiClient } from './cli/client.js';
