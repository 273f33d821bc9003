/**
 * The one place where errors become HTTP responses. An {@link AppError} keeps its status, message
 * and headers; Fastify's own errors (bad JSON, body too large, validation, unsupported media
 * type) are mapped onto registered codes; anything else is a 500 whose details go only to the
 * log. The body follows the surface: OpenAI's `{"error":{message,type,param,code}}` under `/v1/`,
 * Ollama's `{"error":"..."}` everywhere else.
 *
 * @module
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, Errors, isAppError } from '../errors.js';
import { surfaceOf } from './surface.js';
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

/** The body of an error for a surface. */
export function errorBody(url: string, error: AppError): unknown {
  if (surfaceOf(url) === 'openai') {
    return { error: { message: error.message, type: error.openaiType, param: error.param, code: error.openaiCode } };
  }
  return { error: error.message };
}

/** Fastify error handler: the only mapper from errors to responses. */
export function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const error = toAppError(err);
  if (error.statusCode >= 500) request.log.error({ err }, 'request failed');
  else request.log.info({ code: error.code, msg: error.message }, 'request rejected');
  for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
  if (error.statusCode === 401) reply.header('WWW-Authenticate', 'Bearer');
  return reply.code(error.statusCode).type('application/json; charset=utf-8').send(errorBody(request.url, error));
}
