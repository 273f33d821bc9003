/**
 * `lia/plugin`: the versioned plugin contract, and the module of core that every plugin imports,
 * built-in ones included. It holds the runtime a plugin lives in: what a plugin is
 * ({@link definePlugin}, its spec and context), the hooks it reaches the others through, the kinds
 * of extension core itself asks for (auth strategies, GPU probes, observers, TLS), the error
 * registry, the streaming writers and the CLI command contract.
 *
 * The shapes those contracts carry are in `lia/plugin/contracts`, under the same version. The
 * services one built-in plugin offers the others are that plugin's own, declared by its public
 * module as extensions ({@link CustomHooks}): the engine and the inference backend contract
 * (`lia/engine`), the model store and model sources (`lia/model-store`), the key store
 * (`lia/auth-api-key`), the service manager (`lia/host-services`), the network
 * (`lia/host-network`), the GPU monitor (`lia/host-gpu`). Helpers that are not part of the
 * contract (formatting, atomic writes, paths, the CLI's HTTP client, host tools, TypeBox) are in
 * `lia/utils`, which follows no API version.
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
export { SoleHook, Registry, Extensions, type Hooks, type BannerSection, type ErrorFormat, type CustomHooks } from './plugin/hooks.js';
export type { ServiceRegistry, ServiceRole, ServiceDeclaration } from './services/registry.js';
export type { LogHub } from './logging.js';
export { AppError, Errors, defineError, isAppError, type AppErrorOptions, type EngineCrash, type ErrorFactory } from './errors.js';
export { startNdjson } from './http/streaming.js';
export { startSse, type SseOptions } from './http/streaming.js';
export { clientGone, pump, type StreamFrames, type StreamWriter } from './http/streaming.js';
export { currentPrincipal } from './http/auth.js';
export type { Scope } from './http/auth.js';
export type { Config } from './config/schema.js';
export { ConfigError } from './config/load.js';
export type { Principal, AuthResult, AuthStrategy } from './contracts/auth.js';
export type { GpuProvider } from './contracts/host.js';
export type { TlsProvider } from './contracts/tls.js';
export type { RequestObserver, InferenceObserver } from './contracts/observe.js';
export { CliError, isCliError, type CliCommand, type CliIO, type CliArgs } from './cli/types.js';
export type { ApiClient } from './cli/client.js';
