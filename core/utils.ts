/**
 * `lia/utils`: helpers the built-in plugins share that are not part of the plugin contract:
 * formatting, atomic file writes, paths, the CLI's HTTP client, host tools and a TypeBox
 * re-export. It follows no API version: any release may change it. A third-party plugin may use
 * it at that risk, or bring its own copies (TypeBox from `@sinclair/typebox`).
 *
 * @module
 */
export { grants } from './http/auth.js';
export { checkModelAllowed, mayUse, principalMayUse } from './http/auth.js';
export { toAppError } from './http/error-handler.js';
export { normalizePath } from './http/surface.js';
export { readTextOrNull } from './fs/read.js';
export { flushToDisk, writeFileAtomic, type AtomicWriteOptions } from './fs/write-atomic.js';
export { VERSION } from './version.js';
export { formatBytes } from './format/bytes.js';
export { table } from './format/table.js';
export { humanNumber } from './format/human-number.js';
export { checkSchemaBounds, SCHEMA_MAX_DEPTH, SCHEMA_MAX_NODES } from './format/json-bounds.js';
export { PROJECT_ROOT, projectPath } from './paths.js';
export { responseError } from './cli/client.js';
export { runTool, firstLine, ToolError, type ToolResult } from './host/run-tool.js';
export { imageFromDataUrl, imageMimeType, isRemoteImage } from './format/image-data.js';
export { wavFile } from './format/wav.js';
/** TypeBox, for option and route schemas, so that a plugin needs no copy of its own. */
export { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';
