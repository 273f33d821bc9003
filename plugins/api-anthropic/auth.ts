/**
 * The `x-api-key` auth strategy: Anthropic's SDKs and Claude Code send the key in this header
 * rather than as `Authorization: Bearer` (which auth-api-key already accepts). It is the same key
 * with the same scopes. The `anthropic-version` and `anthropic-beta` headers are not looked at.
 *
 * The key is handed to auth-api-key's own Bearer strategy when it is registered, as if it had
 * come as `Authorization: Bearer`, so a key sent this way meets the same checks (key shape,
 * checksum, the per-address limit on wrong keys) and gets the same messages; without that
 * strategy it goes straight to the key store.
 *
 * @module
 */
import type { FastifyRequest } from 'fastify';
import type { AuthResult, AuthStrategy, Hooks } from 'lia/plugin';

/** The name of auth-api-key's strategy. */
const BEARER = 'bearer-api-key';

/** The value of `x-api-key`, trimmed, or null when it is missing or empty. */
export function xApiKey(request: Pick<FastifyRequest, 'headers'>): string | null {
  const value = request.headers['x-api-key'];
  const key = typeof value === 'string' ? value.trim() : '';
  return key === '' ? null : key;
}

/** The request as seen with `Authorization: Bearer <key>` (everything else, `ip` included, unchanged). */
function asBearer(request: FastifyRequest, key: string): FastifyRequest {
  const headers = { ...request.headers, authorization: `Bearer ${key}` };
  return Object.create(request, { headers: { value: headers, enumerable: true } }) as FastifyRequest;
}

/** The strategy. Without a key store (auth-api-key disabled) it admits nobody. */
export function xApiKeyStrategy(hooks: Hooks): AuthStrategy {
  return {
    name: 'x-api-key',
    async authenticate(request): Promise<AuthResult> {
      const key = xApiKey(request);
      if (key === null) return { kind: 'absent' };
      const bearer = hooks.auth.list().find((s) => s.name === BEARER);
      if (bearer) return bearer.authenticate(asBearer(request, key));
      const store = hooks.keys.maybe();
      if (store === undefined) return { kind: 'absent' };
      const principal = store.verify(key);
      return principal ? { kind: 'ok', principal } : { kind: 'invalid', reason: 'invalid API key' };
    },
  };
}
