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
 * @module
 */

/** OpenAI error `type` values, used when the error is rendered on the `/v1/` surface. */
export type OpenAIErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'server_error'
  | 'service_unavailable_error';

export interface AppErrorOptions {
  /** The underlying cause, kept for the log; never sent to the client. */
  cause?: unknown;
  /** The request field the error is about (OpenAI's `param`). */
  param?: string | null;
  /** Extra response headers (for example `Retry-After`). */
  headers?: Record<string, string>;
}

export class AppError extends Error {
  readonly code: string;
  readonly statusCode: number;
  readonly openaiType: OpenAIErrorType;
  readonly openaiCode: string | null;
  readonly param: string | null;
  readonly headers: Record<string, string>;

  constructor(
    code: string,
    statusCode: number,
    message: string,
    openai: { type: OpenAIErrorType; code?: string | null },
    options: AppErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.statusCode = statusCode;
    this.openaiType = openai.type;
    this.openaiCode = openai.code ?? null;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
  }
}

/** A factory for one registered error code. */
export type ErrorFactory = (message: string, options?: AppErrorOptions) => AppError;

const registry = new Map<string, { statusCode: number; description: string }>();

/**
 * Registers an error code once and returns its factory. Codes are `LIA_ERR_*`; registering the
 * same code twice is a programming error and throws.
 */
export function defineError(
  code: string,
  statusCode: number,
  description: string,
  openai: { type: OpenAIErrorType; code?: string | null },
): ErrorFactory {
  if (registry.has(code)) throw new Error(`error code ${code} is registered twice`);
  registry.set(code, { statusCode, description });
  return (message, options) => new AppError(code, statusCode, message, openai, options);
}

/** Every registered code with its status and description (feeds docs/errors.md). */
export function registeredErrors(): ReadonlyMap<string, { statusCode: number; description: string }> {
  return registry;
}

export const Errors = {
  badRequest: defineError('LIA_ERR_BAD_REQUEST', 400, 'The request is malformed or a field is invalid.', {
    type: 'invalid_request_error',
  }),
  invalidJson: defineError('LIA_ERR_INVALID_JSON', 400, 'The body is not valid JSON.', {
    type: 'invalid_request_error',
  }),
  unauthorized: defineError('LIA_ERR_UNAUTHORIZED', 401, 'No API key, or a wrong one.', {
    type: 'invalid_request_error',
    code: 'invalid_api_key',
  }),
  forbidden: defineError('LIA_ERR_FORBIDDEN', 403, 'The key may not do this.', { type: 'permission_error' }),
  notFound: defineError('LIA_ERR_NOT_FOUND', 404, 'No such path or resource.', {
    type: 'invalid_request_error',
    code: 'not_found',
  }),
  modelNotFound: defineError('LIA_ERR_MODEL_NOT_FOUND', 404, 'The model is not in the store.', {
    type: 'invalid_request_error',
    code: 'model_not_found',
  }),
  methodNotAllowed: defineError('LIA_ERR_METHOD_NOT_ALLOWED', 405, 'The path exists but not for this method.', {
    type: 'invalid_request_error',
    code: 'method_not_allowed',
  }),
  conflict: defineError('LIA_ERR_CONFLICT', 409, 'The action conflicts with the current state.', {
    type: 'invalid_request_error',
    code: 'conflict',
  }),
  payloadTooLarge: defineError('LIA_ERR_PAYLOAD_TOO_LARGE', 413, 'The body is over the size limit.', {
    type: 'invalid_request_error',
    code: 'payload_too_large',
  }),
  unsupportedMediaType: defineError('LIA_ERR_UNSUPPORTED_MEDIA_TYPE', 415, 'The body has a content type the route does not take.', {
    type: 'invalid_request_error',
  }),
  tooManyRequests: defineError('LIA_ERR_TOO_MANY_REQUESTS', 429, 'Too many requests (or failed keys) from this client.', {
    type: 'rate_limit_error',
    code: 'rate_limit_exceeded',
  }),
  internal: defineError('LIA_ERR_INTERNAL', 500, 'An unexpected failure; details are in the log.', {
    type: 'server_error',
  }),
  engineFailed: defineError('LIA_ERR_ENGINE_FAILED', 500, 'The inference runner failed while serving the request.', {
    type: 'server_error',
    code: 'engine_error',
  }),
  badGateway: defineError('LIA_ERR_BAD_GATEWAY', 502, 'An upstream (for example a registry) answered badly.', {
    type: 'server_error',
    code: 'bad_gateway',
  }),
  unavailable: defineError('LIA_ERR_UNAVAILABLE', 503, 'A service is stopped or the queue is full.', {
    type: 'service_unavailable_error',
    code: 'service_unavailable',
  }),
  timeout: defineError('LIA_ERR_TIMEOUT', 504, 'An upstream did not answer in time.', {
    type: 'server_error',
    code: 'timeout',
  }),
} as const;

/** True for errors whose message may be shown to the client as it is. */
export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
