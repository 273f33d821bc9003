/**
 * Anthropic's error format, `{"type":"error","error":{"type","message"}}`, for every error under
 * `/v1/messages`: the api-anthropic plugin registers it with core, whose longest-prefix match lets
 * it win over OpenAI's `/v1` there (401, 404, validation, a stream's last `event: error` frame).
 * The `type` follows the HTTP status, as Anthropic's SDKs pick the exception class from it.
 *
 * @module
 */
import type { AppError, ErrorFormat } from 'lia/plugin';

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'rate_limit_error'
  | 'api_error'
  | 'overloaded_error';

const BY_STATUS: Readonly<Record<number, AnthropicErrorType>> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  503: 'overloaded_error',
  529: 'overloaded_error',
};

/** Anthropic's `type` for a status: the table above, else `invalid_request_error` (4xx) or `api_error` (5xx). */
export function anthropicErrorType(status: number): AnthropicErrorType {
  return BY_STATUS[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
}

/** The Anthropic body of an error (also the data of a stream's `event: error` frame). */
export function anthropicErrorBody(error: AppError): { type: 'error'; error: { type: AnthropicErrorType; message: string } } {
  return { type: 'error', error: { type: anthropicErrorType(error.statusCode), message: error.message } };
}

export const anthropicErrorFormat: ErrorFormat = { name: 'anthropic', prefix: '/v1/messages', body: anthropicErrorBody };
