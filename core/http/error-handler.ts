/**
 * The one place where errors become HTTP responses. An {@link AppError} keeps its status, message
 * and headers; Fastify's own errors (bad JSON, body too large, validation, unsupported media
 * type) are mapped onto registered codes; anything else is a 500 whose details go only to the
 * log. The body follows the surface: a plugin that serves an API surface registers its error
 * format in `hooks.errorFormats` (OpenAI's `{"error":{message,type,param,code}}` under `/v1`, by
 * api-openai); everything else gets `{"error":"..."}`, the shape of Ollama's API and `/system/`.
 *
 * @module
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, Errors, isAppError } from '../errors.js';
import type { ErrorFormat } from '../plugin/hooks.js';
import type { Registry } from '../plugin/hooks.js';
import { normalizePath } from './surface.js';
import { validationError, type SchemaError } from './validation-error.js';

/** Maps any thrown value to an AppError. */
export function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const fe = err as Partial<FastifyError> & { validation?: unknown[]; validationContext?: string };
  if (fe && typeof fe === 'object') {
    if (fe.validation) return validationError(fe.validation as SchemaError[], fe.validationContext, err);
    switch (fe.code) {
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return Errors.invalidJson(fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'the body is empty but the content type is JSON' : `the body is not valid JSON: ${fe.message}`, { cause: err });
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return Errors.payloadTooLarge('the request body is larger than the limit', { cause: err });
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return Errors.unsupportedMediaType(`unsupported content type: ${fe.message}`, { cause: err });
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return Errors.badRequest('the Content-Length header does not match the body', { cause: err });
      default:
        break;
    }
    if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
      return Errors.badRequest(fe.message ?? 'bad request', { cause: err });
    }
  }
  return Errors.internal('internal server error', { cause: err });
}

/** The error format of the surface a raw URL belongs to, or null for the default shape. */
export function errorFormatFor(formats: Registry<ErrorFormat>, url: string): ErrorFormat | null {
  const p = normalizePath(url);
  let best: ErrorFormat | null = null;
  for (const f of formats.list()) {
    if ((p === f.prefix || p.startsWith(f.prefix + '/')) && (!best || f.prefix.length > best.prefix.length)) best = f;
  }
  return best;
}

/** The default error body: `{"error":"message"}`. */
export function defaultErrorBody(error: AppError): unknown {
  return { error: error.message };
}

/** The Fastify error handler over the registered surface formats: the only mapper from errors to responses. */
export function createErrorHandler(formats: Registry<ErrorFormat>) {
  return function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const error = toAppError(err);
    if (error.statusCode >= 500) request.log.error({ err }, 'request failed');
    else request.log.info({ code: error.code, msg: error.message }, 'request rejected');
    for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
    if (error.statusCode === 401) reply.header('WWW-Authenticate', 'Bearer');
    const body = (errorFormatFor(formats, request.url)?.body ?? defaultErrorBody)(error);
    return reply.code(error.statusCode).type('application/json; charset=utf-8').send(body);
  };
}
