/**
 * The `auth-api-key` plugin: the master API key and named, scoped keys. It registers the Bearer
 * strategy that core's auth gate asks on every non-public route, provides the key store, serves
 * `/system/api-keys` (create, list, rotate, revoke) and `/system/usage`, and counts usage per key
 * and model from the engine's inference events.
 *
 * A key is never logged: core redacts `Authorization`, and this plugin logs only names and hints.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { definePlugin, Errors, type AuthResult } from 'lia/plugin';
import { FailureLimiter } from './failure-limiter.js';
import { checkShape, digestOf, hintOf } from './key-store.js';
import { FileKeyStore } from './key-store.js';
import { NamedKeyStore } from './named-keys.js';
import { keyRoutes } from './routes.js';
import { UsageStore } from './usage.js';

const Options = Type.Object(
  {
    /** Wrong keys one client address may present in a burst before 429. Defaults to 10. */
    failureBurst: Type.Integer({ minimum: 1, default: 10 }),
    /** Seconds to earn back one failure. Defaults to 6. */
    failureRefillSeconds: Type.Number({ exclusiveMinimum: 0, default: 6 }),
    /** Milliseconds between a usage change and its save to `<data dir>/usage.json`. Defaults to 2000. */
    usageSaveDelayMs: Type.Integer({ minimum: 0, default: 2000 }),
  },
  { additionalProperties: false },
);

/** The token of `Authorization: Bearer <token>`, or null. The scheme is case-insensitive. */
function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return null;
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  return m ? (m[1] as string) : null;
}

/**
 * The key a request presents: `Authorization: Bearer`, or one of the headers its route declares
 * in `config.credentialHeaders` (`x-api-key` on Anthropic's routes; ignored on every other
 * route). `conflict` when two of them carry different keys: which one is meant cannot be known.
 */
export function presentedKey(request: FastifyRequest): string | null | 'conflict' {
  const found = new Set<string>();
  const bearer = bearerToken(request);
  if (bearer !== null) found.add(bearer);
  for (const name of request.routeOptions?.config?.credentialHeaders ?? []) {
    const value = request.headers[name.toLowerCase()];
    const key = typeof value === 'string' ? value.trim() : '';
    if (key !== '') found.add(key);
  }
  if (found.size > 1) return 'conflict';
  return found.size === 1 ? ([...found][0] as string) : null;
}

export default definePlugin({
  name: 'auth-api-key',
  apiVersion: 2,
  provides: ['keys'],
  description: 'API keys: the master key, named scoped keys with limits, usage, /system/api-keys',
  options: Options,
  commands: async () => (await import('./cli/commands.js')).commands,
  async setup(app, ctx) {
    const store = await FileKeyStore.open(ctx.config.dataDir);
    const named = await NamedKeyStore.open(ctx.config.dataDir);
    const usage = await UsageStore.open(ctx.config.dataDir, {
      debounceMs: ctx.options.usageSaveDelayMs,
      onError: (err) => ctx.log.error({ err }, 'saving API key usage failed'),
    });
    // Token limits are settled by the engine's admission (Principal.admit), not from these events.
    ctx.hooks.inferenceObservers.register({ name: 'api-key-usage', onEvent: (event) => usage.record(event) });
    app.addHook('onClose', async () => usage.flush());
    const limiter = new FailureLimiter({ burst: ctx.options.failureBurst, refillSeconds: ctx.options.failureRefillSeconds });
    ctx.hooks.extensions.provide('keys', store, ctx.name);
    ctx.hooks.banner.register({
      name: 'master-key',
      order: 20,
      lines: () => [
        ['Master key', store.masterKeyPath],
        // Only the hint, and only on the boot that created the key: the banner goes where the
        // process's output goes (the journal, under systemd), and a key is never written there.
        ...(store.firstBootKey ? ([['New key', `created on this boot, ends in …${hintOf(store.firstBootKey)}: print it with "lia key show"`]] as const) : []),
      ],
    });

    ctx.hooks.auth.register({
      name: 'bearer-api-key',
      authenticate(request): AuthResult {
        const token = presentedKey(request);
        if (token === null) return { kind: 'absent' };
        if (token === 'conflict')
          return { kind: 'invalid', reason: 'the request carries two different API keys (Authorization and another key header); send one' };
        // A token without a LIA key's shape can never match one: another strategy may own it, so
        // it neither counts as a failed key nor meets the failure limiter.
        if (checkShape(token) === 'not-lia') return { kind: 'invalid', reason: 'invalid API key: LIA keys look like lia_<43 characters>_<6 characters>' };
        // The key is checked first (in constant time): the right key is never refused because
        // other clients behind the same address sent wrong ones. Only failures meet the limiter.
        const digest = digestOf(token);
        const principal = store.verifyDigest(digest);
        if (principal) {
          usage.touch('master');
          return { kind: 'ok', principal };
        }
        const key = named.lookup(digest);
        if (key) {
          // A right key past its time: refused, but not a guess, so the limiter is not told.
          if (Date.now() >= key.expiresAt) return { kind: 'invalid', reason: 'key expired' };
          key.limiter.request();
          usage.touch(key.record.name);
          return { kind: 'ok', principal: key.principal };
        }
        const wait = limiter.retryAfter(request.ip);
        if (wait > 0) {
          throw Errors.tooManyRequests(`too many failed API keys from this address; retry in ${wait} s`, { headers: { 'Retry-After': String(wait) } });
        }
        limiter.fail(request.ip);
        if (checkShape(token) === 'checksum') return { kind: 'invalid', reason: 'the API key has a typo: its checksum does not match' };
        return { kind: 'invalid', reason: 'invalid API key' };
      },
    });

    // The master key holds everything: only a key that may administer the system takes it over
    // (`keys:admin` alone is not enough; its keys are held to "no broader than itself").
    app.post('/system/api-keys/rotate', { config: { scope: 'system:admin' } }, async (_request, reply) => {
      const { key, hint } = await store.rotateMaster();
      ctx.log.warn({ hint }, 'master API key rotated; the previous key no longer works');
      ctx.hooks.console(`\n  Master key rotated (new key ends in …${hint}); "lia key show" prints it. Old integrations fail until they use it.\n\n`);
      return reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache').send({
        key,
        hint,
        key_file: store.masterKeyPath,
        rotated_at: new Date().toISOString(),
      });
    });
    keyRoutes(app, { master: store, keys: named, usage, log: ctx.log });
  },
});
