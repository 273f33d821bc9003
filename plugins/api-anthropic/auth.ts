/**
 * The `x-api-key` auth strategy: Anthropic's SDKs and Claude Code send the key in this header
 * rather than as `Authorization: Bearer` (which auth-api-key already accepts). The secret is
 * checked by the appliance's key store, so it is the same key with the same scopes. The
 * `anthropic-version` and `anthropic-beta` headers are not looked at.
 *
 * @module
 */
import type { FastifyRequest } from 'fastify';
import type { AuthResult, AuthStrategy, Hooks } from 'lia/plugin';

/** The value of `x-api-key`, trimmed, or null when it is missing or empty. */
export function xApiKey(request: Pick<FastifyRequest, 'headers'>): string | null {
  const value = request.headers['x-api-key'];
  const key = typeof value === 'string' ? value.trim() : '';
  return key === '' ? null : key;
}

/**
 * The strategy. Without a key store (auth-api-key disabled) it admits nobody and leaves the
 * answer to the other strategies.
 */
export function xApiKeyStrategy(hooks: Hooks): AuthStrategy {
  return {
    name: 'x-api-key',
    authenticate(request): AuthResult {
      const key = xApiKey(request);
      const store = hooks.keys.maybe();
      if (key === null || store === undefined) return { kind: 'absent' };
      const principal = store.verify(key);
      return principal ? { kind: 'ok', principal } : { kind: 'invalid', reason: 'invalid API key (x-api-key)' };
    },
  };
}
