/**
 * OpenAI's error format, `{"error":{message,type,param,code}}`, for every error on `/v1/`: the
 * api-openai plugin registers it with core, which renders every failure of a `/v1/` request (401,
 * 404, validation, a stream's last frame) through it. OpenAI's `type` and `code` come from LIA's
 * error code where OpenAI has a matching one, else from the HTTP status.
 *
 * @module
 */
import type { AppError, ErrorFormat } from 'lia/plugin';

type OpenAIErrorType =
  'invalid_request_error' | 'authentication_error' | 'permission_error' | 'not_found_error' | 'rate_limit_error' | 'server_error' | 'service_unavailable_error';

/** LIA codes with an OpenAI `code` of their own (`type` follows the status). */
const CODES: Readonly<Record<string, string>> = {
  LIA_ERR_UNAUTHORIZED: 'invalid_api_key',
  LIA_ERR_NOT_FOUND: 'not_found',
  LIA_ERR_MODEL_NOT_FOUND: 'model_not_found',
  LIA_ERR_METHOD_NOT_ALLOWED: 'method_not_allowed',
  LIA_ERR_CONFLICT: 'conflict',
  LIA_ERR_PAYLOAD_TOO_LARGE: 'payload_too_large',
  LIA_ERR_CONTEXT_LENGTH_EXCEEDED: 'context_length_exceeded',
  LIA_ERR_TOO_MANY_REQUESTS: 'rate_limit_exceeded',
  LIA_ERR_ENGINE_FAILED: 'engine_error',
  LIA_ERR_ENGINE_CRASHED: 'engine_crashed',
  LIA_ERR_BAD_GATEWAY: 'bad_gateway',
  LIA_ERR_UNAVAILABLE: 'service_unavailable',
  LIA_ERR_TIMEOUT: 'timeout',
  LIA_ERR_INSUFFICIENT_STORAGE: 'insufficient_storage',
};

/**
 * OpenAI's `type` for a status. OpenAI itself answers a wrong key with `invalid_request_error`
 * (code `invalid_api_key`), and its SDKs pick the exception class from the status, so 4xx other
 * than 403 and 429 stay `invalid_request_error`.
 */
function typeOf(status: number): OpenAIErrorType {
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503) return 'service_unavailable_error';
  return status >= 500 ? 'server_error' : 'invalid_request_error';
}

/** The OpenAI body of an error. */
export function openaiErrorBody(error: AppError): { error: { message: string; type: OpenAIErrorType; param: string | null; code: string | null } } {
  return { error: { message: error.message, type: typeOf(error.statusCode), param: error.param, code: CODES[error.code] ?? null } };
}

export const openaiErrorFormat: ErrorFormat = { name: 'openai', prefix: '/v1', body: openaiErrorBody };
