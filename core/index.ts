/**
 * `lia/plugin`: the public API for plugin authors, and the only module of core that plugins import,
 * built-in ones included. It holds the plugin contract, the hook interfaces and contracts, the
 * error registry, the streaming helpers, the CLI command contract and a few file and host helpers.
 *
 * Versioning: this module follows {@link PLUGIN_API_VERSION}. Within one major version, exports
 * are only added; a removal or an incompatible change of a signature raises the major, and core
 * refuses plugins written for another major at load (exit code 2).
 *
 * @module
 */
import './http/route-config.js';
export { SCOPES, grants, type Scope } from './http/scopes.js';
export { checkModelAllowed, currentPrincipal, modelAllowed, principalMayUse } from './http/request-principal.js';
export { definePlugin, PLUGIN_API_VERSION, type LiaPlugin, type PluginContext, type PluginSpec } from './plugin/define.js';
export { Slot, Registry, Extensions, type Hooks, type BannerSection, type ErrorFormat, type CustomHooks } from './plugin/hooks.js';
export { BackendRegistry } from './plugin/hooks.js';
export { AppError, Errors, defineError, isAppError, type AppErrorOptions, type ErrorFactory } from './errors.js';
export { startNdjson, clientGone, type StreamWriter } from './streaming/ndjson.js';
export { startSse, type SseOptions } from './streaming/sse.js';
export { primed } from './streaming/primed.js';
export { toAppError } from './http/error-handler.js';
export { normalizePath } from './http/surface.js';
export { SERVICE_NAMES, isServiceName, ServiceRegistry, type ServiceName, type ServiceRole, type ServiceState } from './services/registry.js';
export { LogHub } from './logging.js';
export { readTextOrNull } from './fs/read.js';
export { flushToDisk, writeFileAtomic, type AtomicWriteOptions } from './fs/write-atomic.js';
export { VERSION } from './version.js';
export { advertisedUrls, certificateCovers, type AdvertiseInput } from './banner.js';
export { formatBytes } from './format/bytes.js';
export { humanNumber } from './format/human-number.js';
export { checkSchemaBounds, SCHEMA_MAX_DEPTH, SCHEMA_MAX_NODES } from './format/json-bounds.js';
export { PROJECT_ROOT, projectPath } from './paths.js';
export type { Config } from './config/schema.js';
export type * from './contracts/auth.js';
export type * from './contracts/backend.js';
export type * from './contracts/host.js';
export type * from './contracts/inference.js';
export type * from './contracts/model-store.js';
export type * from './contracts/network.js';
export type * from './contracts/observe.js';
export type * from './contracts/tls.js';
export { CliError, isCliError, type CliCommand, type CliIO, type CliArgs } from './cli/types.js';
export { responseError, type ApiClient } from './cli/client.js';
export { runTool, firstLine, ToolError, type ToolResult } from './host/run-tool.js';
/** TypeBox, for option and route schemas, so that a plugin needs no copy of its own. */
export { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';
