/**
 * The public surface of LIA's core for plugin authors: the plugin contract, the hook interfaces,
 * the error registry and the streaming helpers. Plugins import from here, never from deeper
 * paths of core.
 *
 * @module
 */
export { definePlugin, type LiaPlugin, type PluginContext } from './plugin/define.js';
export { Slot, Registry, BackendRegistry, type Hooks } from './plugin/hooks.js';
export { AppError, Errors, defineError, isAppError, type ErrorFactory, type OpenAIErrorType } from './errors.js';
export { startNdjson, clientGone, type StreamWriter } from './streaming/ndjson.js';
export { startSse } from './streaming/sse.js';
export { primed } from './streaming/primed.js';
export { toAppError, errorBody } from './http/error-handler.js';
export { normalizePath, surfaceOf, type Surface } from './http/surface.js';
export { SERVICE_NAMES, isServiceName, ServiceRegistry, type ServiceName, type ServiceRole, type ServiceState } from './services/registry.js';
export { LogHub } from './logging.js';
export { readTextOrNull } from './fs/read.js';
export { flushToDisk, writeFileAtomic, type AtomicWriteOptions } from './fs/write-atomic.js';
export { VERSION } from './version.js';
export { formatBytes } from './format/bytes.js';
export { humanNumber } from './format/human-number.js';
export { PROJECT_ROOT, projectPath } from './paths.js';
export type { Config } from './config/schema.js';
export type * from './contracts/auth.js';
export type * from './contracts/backend.js';
export type * from './contracts/host.js';
export type * from './contracts/inference.js';
export type * from './contracts/model-store.js';
export type * from './contracts/network.js';
export type * from './contracts/tls.js';
export { CliError, type CliCommand, type CliIO, type CliArgs } from './cli/types.js';
export { responseError, type ApiClient } from './cli/client.js';
export { runTool, firstLine, ToolError, type ToolResult } from './host/run-tool.js';
