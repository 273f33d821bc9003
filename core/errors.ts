/**
 * The single error registry of the appliance.
 *
 * Every deliberate failure is an {@link AppError}: a stable `code`, an HTTP `statusCode` and a
 * message that is safe to show to the client. Plugins create them with the factories below (or
 * with {@link defineError} for their own codes); `core/http/error-handler.ts` is the one place
 * that turns them into HTTP responses in the error format of the request's surface.
 *
 * Anything that is not an AppError becomes a generic 500 whose details only reach the log.
 *
 * An AppError is recognised by a brand (a global symbol), not by `instanceof`: a plugin installed
 * with its own copy of the `lia` package throws errors of its copy's class, and they must keep
 * their status, message and headers all the same.
 *
 * @module
 */

export interface AppErrorOptions {
  /** The underlying cause, kept for the log; never sent to the client. */
  cause?: unknown;
  /** The request field the error is about (OpenAI's `param`, e.g. `messages[0].role`). */
  param?: string | null;
  /** Extra response headers (for example `Retry-After`). */
  headers?: Record<string, string>;
  /** The engine process that died of a signal, for {@link Errors.engineCrashed}; kept for the engine, never sent. */
  crash?: EngineCrash;
}

/**
 * An engine process that died of a signal (a native crash such as SIGILL or SIGSEGV, or a kill)
 * while it loaded a model: which engine (the backend's name) and which signal. The engine's
 * scheduler loads such a model once more, then on the next engine that runs it.
 */
export interface EngineCrash {
  engine: string;
  signal: string;
}

/** The brand every AppError carries, shared by every copy of the package. */
const BRAND = Symbol.for('lia.app-error');

export class AppError extends Error {
  readonly [BRAND] = true;
  readonly code: string;
  readonly statusCode: number;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  /** Set for {@link Errors.engineCrashed}: the engine and the signal it died of. */
  readonly crash: EngineCrash | null;

  constructor(code: string, statusCode: number, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.statusCode = statusCode;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
    this.crash = options.crash ?? null;
  }
}

/** A factory for one registered error code. */
export type ErrorFactory = (message: string, options?: AppErrorOptions) => AppError;

const registry = new Map<string, { statusCode: number; description: string }>();

/**
 * Registers an error code once and returns its factory. Codes are `LIA_ERR_*`; registering the
 * same code twice is a programming error and throws.
 */
export function defineError(code: string, statusCode: number, description: string): ErrorFactory {
  if (registry.has(code)) throw new Error(`error code ${code} is registered twice`);
  registry.set(code, { statusCode, description });
  return (message, options) => new AppError(code, statusCode, message, options);
}

/** Every registered code with its status and description (feeds docs/errors.md). */
export function registeredErrors(): ReadonlyMap<string, { statusCode: number; description: string }> {
  return registry;
}

export const Errors = {
  badRequest: defineError('LIA_ERR_BAD_REQUEST', 400, 'The request is malformed or a field is invalid.'),
  invalidJson: defineError('LIA_ERR_INVALID_JSON', 400, 'The body is not valid JSON.'),
  unauthorized: defineError('LIA_ERR_UNAUTHORIZED', 401, 'No API key, or a wrong one.'),
  forbidden: defineError('LIA_ERR_FORBIDDEN', 403, 'The key may not do this.'),
  notFound: defineError('LIA_ERR_NOT_FOUND', 404, 'No such path or resource.'),
  modelNotFound: defineError('LIA_ERR_MODEL_NOT_FOUND', 404, 'The model is not in the store.'),
  methodNotAllowed: defineError('LIA_ERR_METHOD_NOT_ALLOWED', 405, 'The path exists but not for this method.'),
  requestTimeout: defineError('LIA_ERR_REQUEST_TIMEOUT', 408, 'The client did not send its request headers in time.'),
  conflict: defineError('LIA_ERR_CONFLICT', 409, 'The action conflicts with the current state.'),
  payloadTooLarge: defineError('LIA_ERR_PAYLOAD_TOO_LARGE', 413, 'The body is over the size limit.'),
  uriTooLong: defineError('LIA_ERR_URI_TOO_LONG', 414, 'A path segment is longer than the router accepts.'),
  contextLengthExceeded: defineError('LIA_ERR_CONTEXT_LENGTH_EXCEEDED', 400, "The prompt is longer than the model's context takes."),
  unsupportedMediaType: defineError('LIA_ERR_UNSUPPORTED_MEDIA_TYPE', 415, 'The body has a content type the route does not take.'),
  headersTooLarge: defineError('LIA_ERR_HEADERS_TOO_LARGE', 431, 'The request headers are larger than the server accepts.'),
  tooManyRequests: defineError('LIA_ERR_TOO_MANY_REQUESTS', 429, 'Too many requests (or failed keys) from this client.'),
  internal: defineError('LIA_ERR_INTERNAL', 500, 'An unexpected failure; details are in the log.'),
  engineFailed: defineError('LIA_ERR_ENGINE_FAILED', 500, 'The inference runner failed while serving the request.'),
  /** Give `options.crash`: the scheduler retries and falls back on it (see {@link EngineCrash}). */
  engineCrashed: defineError('LIA_ERR_ENGINE_CRASHED', 500, 'An engine process died of a signal while it loaded the model, on every engine that runs it.'),
  badGateway: defineError('LIA_ERR_BAD_GATEWAY', 502, 'An upstream (for example a registry) answered badly.'),
  unavailable: defineError('LIA_ERR_UNAVAILABLE', 503, 'A service is stopped or the queue is full.'),
  timeout: defineError('LIA_ERR_TIMEOUT', 504, 'An upstream did not answer in time.'),
} as const;

/** True for errors whose message may be shown to the client as it is, from any copy of the package. */
export function isAppError(err: unknown): err is AppError {
  return typeof err === 'object' && err !== null && (err as { [BRAND]?: unknown })[BRAND] === true;
}
