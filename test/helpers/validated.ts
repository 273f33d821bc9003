/**
 * A route schema and the function behind it, tested without a server: a bare Fastify app with
 * the appliance's Ajv options and error handler (with the OpenAI format under `/v1`), one `POST` route at `url` (its surface picks
 * the error format) that validates the body and runs `fn` on it. `inject()` only, no socket.
 *
 * @module
 */
import Fastify from 'fastify';
import type { TSchema } from '@sinclair/typebox';
import { AJV_OPTIONS } from '../../core/http/app.js';
import { createErrorHandler } from '../../core/http/error-handler.js';
import { Registry, type ErrorFormat } from '../../core/plugin/hooks.js';
import { openaiErrorFormat } from '../../plugins/api-openai/errors.js';

export interface Validated<R> {
  status: number;
  /** What `fn` returned, when the body passed. */
  value?: R;
  /** The error body, when it did not. */
  error?: unknown;
}

export async function validated<B, R>(schema: TSchema, fn: (body: B) => R, url = '/v1/test'): Promise<(body: unknown) => Promise<Validated<R>>> {
  const app = Fastify({ ajv: { customOptions: { ...AJV_OPTIONS, keywords: [...AJV_OPTIONS.keywords] } } });
  const formats = new Registry<ErrorFormat>('error format');
  formats.register(openaiErrorFormat);
  app.setErrorHandler(createErrorHandler(formats));
  let value: R | undefined;
  app.post(url, { schema: { body: schema } }, async (request) => {
    value = fn(request.body as B);
    return { ok: true };
  });
  await app.ready();
  return async (body) => {
    value = undefined;
    const res = await app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    return res.statusCode === 200 ? { status: 200, value } : { status: res.statusCode, error: res.json() };
  };
}
