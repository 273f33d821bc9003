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
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, Errors, isAppError } from '../errors.js';
import type { ErrorFormat } from '../plugin/hooks.js';
import type { Registry } from '../plugin/hooks.js';
import { clientLeft } from './client-left.js';
import { EARLY_SECURITY_HEADERS } from './security-headers.js';
import { normalizePath } from './surface.js';
import { validationError } from './validation-error.js';

/** Maps any thrown value to an AppError. */
export function toAppError(err: unknown): AppError {
  if (isAppError(err)) return err;
  const fe = err as Partial<FastifyError> & { validation?: unknown[]; validationContext?: string };
  if (fe && typeof fe === 'object') {
    if (fe.validation) return validationError(fe.validation, fe.validationContext, err);
    switch (fe.code) {
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return Errors.invalidJson(
          fe.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ? 'the body is empty but the content type is JSON' : `the body is not valid JSON: ${fe.message}`,
          { cause: err },
        );
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return Errors.payloadTooLarge('the request body is larger than the limit', { cause: err });
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return Errors.unsupportedMediaType(`unsupported content type: ${fe.message}`, { cause: err });
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return Errors.badRequest('the Content-Length header does not match the body', { cause: err });
      case 'FST_ERR_BAD_URL':
        return Errors.badRequest('the path is not valid percent-encoded UTF-8', { cause: err });
      case 'FST_ERR_MAX_PARAM_LENGTH':
        return Errors.uriTooLong('a path segment is longer than the router accepts', { cause: err });
      case 'FST_ERR_ASYNC_CONSTRAINT':
        return Errors.internal('internal server error', { cause: err });
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

/** The body of `error` in the format of the surface `url` belongs to. */
export function errorBodyFor(formats: Registry<ErrorFormat>, url: string, error: AppError): unknown {
  return (errorFormatFor(formats, url)?.body ?? defaultErrorBody)(error);
}

/**
 * The Fastify error handler over the registered surface formats: the only mapper from errors to
 * responses; through {@link createFrameworkErrorHandler} also for Fastify's router failures (a
 * path that is not valid percent-encoding, a route parameter over the length limit).
 *
 * A request refused before its body was read (no key, a wrong key, an unknown path) is answered
 * with `Connection: close`: Node then closes the connection once the answer is written instead of
 * reading the rest of the body to keep the connection, so a client cannot make the appliance
 * read an endless body it will never use.
 */
export function createErrorHandler(formats: Registry<ErrorFormat>) {
  return function errorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
    const error = toAppError(err);
    if (clientLeft(reply.raw)) request.log.info({ reason: error.message }, 'client went away before the answer');
    else if (error.statusCode >= 500) request.log.error({ err }, 'request failed');
    else request.log.info({ code: error.code, reason: error.message }, 'request rejected');
    for (const [k, v] of Object.entries(error.headers)) reply.header(k, v);
    if (error.statusCode === 401) reply.header('WWW-Authenticate', 'Bearer');
    if (!request.raw.complete) reply.header('Connection', 'close');
    return reply
      .code(error.statusCode)
      .type('application/json; charset=utf-8')
      .send(errorBodyFor(formats, request.url, error));
  };
}

/** Fastify's `frameworkErrors` handler: the error handler, plus the headers no hook has set yet. */
export function createFrameworkErrorHandler(formats: Registry<ErrorFormat>) {
  const handle = createErrorHandler(formats);
  return function frameworkErrorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
    reply.headers(EARLY_SECURITY_HEADERS);
    void handle(err, request, reply);
  };
}

/** The error a connection-level parse failure stands for (Node's `clientError`). */
function clientErrorOf(err: Error & { code?: string }): AppError {
  if (err.code === 'HPE_HEADER_OVERFLOW') return Errors.headersTooLarge('the request headers are larger than 16 KiB', { cause: err });
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return Errors.requestTimeout('the request headers did not arrive in time', { cause: err });
  return Errors.badRequest('malformed HTTP request', { cause: err });
}

/**
 * Fastify's `clientErrorHandler`: a request Node could not parse (a malformed request line or
 * header, headers over the limit, headers too slow) gets an answer in the error format of the
 * surface its path names, when the path can be read, and the connection is closed.
 */
export function createClientErrorHandler(formats: Registry<ErrorFormat>) {
  return function clientErrorHandler(this: { log: FastifyRequest['log'] }, err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const error = clientErrorOf(err);
    this.log.debug({ code: err.code, msg: err.message }, 'malformed request');
    const path = /^[A-Za-z]+ (\/\S*)/.exec(Buffer.isBuffer(err.rawPacket) ? err.rawPacket.toString('latin1') : '')?.[1] ?? '/';
    const body = JSON.stringify(errorBodyFor(formats, path, error));
    if (!socket.writable) return void socket.destroy();
    const head = [
      `HTTP/1.1 ${error.statusCode} ${STATUS_CODES[error.statusCode] ?? 'Error'}`,
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      ...Object.entries(EARLY_SECURITY_HEADERS).map(([k, v]) => `${k}: ${v}`),
      'Connection: close',
    ];
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
    socket.once('finish', () => socket.destroy());
  };
}
