/**
 * `/system/api-keys` (scope `keys:admin`) and `/system/usage` (scope `system:read`): named keys
 * created, listed, rotated and revoked, and their usage. Shapes in docs/security.md. A secret is
 * in a response only once, when it is created or rotated (with `Cache-Control: no-store`).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { FastifyBaseLogger } from 'fastify';
import { Errors, type Principal } from 'lia/plugin';
import { broaderIn, UNBOUNDED, type Breadth } from './breadth.js';
import type { FileKeyStore } from './key-store.js';
import { NAME_PATTERN, namedRecordOf, type KeyRecord, type NamedKeyStore } from './named-keys.js';
import type { UsageStore } from './usage.js';

const Limit = Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000 }));

/** `POST /system/api-keys`. */
const CreateBody = Type.Object(
  {
    name: Type.String({ pattern: NAME_PATTERN, errorMessage: { pattern: `name must match ${NAME_PATTERN}` } }),
    scopes: Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 16 }),
    models: Type.Optional(Type.Union([Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { minItems: 1, maxItems: 100 }), Type.Null()])),
    expires_at: Type.Optional(Type.Union([Type.String({ maxLength: 64 }), Type.Null()])),
    limits: Type.Optional(
      Type.Union([
        Type.Object(
          { requests_per_minute: Limit, tokens_per_minute: Limit, concurrent_streams: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })) },
          { additionalProperties: false },
        ),
        Type.Null(),
      ]),
    ),
  },
  { additionalProperties: false },
);
type CreateBody = Static<typeof CreateBody>;

const NameParams = Type.Object({ name: Type.String({ maxLength: 64 }) });
type NameParams = Static<typeof NameParams>;

function breadthOf(record: KeyRecord): Breadth {
  return { scopes: record.scopes, models: record.models, limits: record.limits, expiresAt: record.expires_at ? Date.parse(record.expires_at) : Infinity };
}

/**
 * The breadth of the requesting principal: a named key's record; else (the master key, another
 * strategy's principal) its scopes and allow-list, with no limits or expiry known to this plugin.
 */
function holderBreadth(principal: Principal | null): Breadth {
  if (!principal) return { ...UNBOUNDED, scopes: [] };
  const record = namedRecordOf(principal);
  if (record) return breadthOf(record);
  return { scopes: principal.scopes, models: principal.models ?? null, limits: null, expiresAt: Infinity };
}

/** Throws 403, naming the dimension, when the key to create or rotate is broader than the requesting one. */
function mayHandOut(principal: Principal | null, action: 'create' | 'rotate', other: Breadth): void {
  const broader = broaderIn(other, holderBreadth(principal));
  if (broader !== null) {
    const what = action === 'create' ? 'create' : 'rotate';
    throw Errors.forbidden(`this API key may ${what} only keys no broader than itself; the key is broader in ${broader}`);
  }
}

export interface KeyRoutesDeps {
  master: FileKeyStore;
  keys: NamedKeyStore;
  usage: UsageStore;
  log: FastifyBaseLogger;
}

export function keyRoutes(app: FastifyInstance, { master, keys, usage, log }: KeyRoutesDeps): void {
  const show = (r: Omit<KeyRecord, 'digest'>) => ({
    name: r.name,
    scopes: r.scopes,
    models: r.models,
    expires_at: r.expires_at,
    limits: r.limits,
    created_at: r.created_at,
    last_used_at: usage.lastUsedAt(r.name),
    hint: r.hint,
    usage: usage.totals(r.name),
  });
  const secret = (reply: FastifyReply) => reply.header('Cache-Control', 'no-store').header('Pragma', 'no-cache');

  app.get('/system/api-keys', { config: { scope: 'keys:admin' } }, async () => {
    const masterKey = show({
      name: 'master',
      scopes: ['*'],
      models: null,
      expires_at: null,
      limits: null,
      created_at: master.createdAt.toISOString(),
      hint: master.hint,
    });
    return { keys: [masterKey, ...keys.list().map((k) => show(k.record))] };
  });

  app.post<{ Body: CreateBody }>('/system/api-keys', { schema: { body: CreateBody }, config: { scope: 'keys:admin' } }, async (request, reply) => {
    const body = request.body;
    // A key may hand out only what it holds itself (breadth.ts): no scope, model, limit or expiry beyond its own.
    mayHandOut(request.principal, 'create', {
      scopes: body.scopes,
      models: body.models ?? null,
      limits: body.limits ?? null,
      expiresAt: body.expires_at ? Date.parse(body.expires_at) : Infinity,
    });
    const { record, key } = await keys.create(body);
    log.info({ name: record.name, scopes: record.scopes, hint: record.hint }, 'API key created');
    return secret(reply)
      .code(201)
      .send({ ...show(record), key });
  });

  app.delete<{ Params: NameParams }>('/system/api-keys/:name', { schema: { params: NameParams }, config: { scope: 'keys:admin' } }, async (request, reply) => {
    await keys.revoke(request.params.name);
    usage.forget(request.params.name);
    log.warn({ name: request.params.name }, 'API key revoked');
    return reply.code(204).send();
  });

  app.post<{ Params: NameParams }>(
    '/system/api-keys/:name/rotate',
    { schema: { params: NameParams }, config: { scope: 'keys:admin' } },
    async (request, reply) => {
      const target = keys.get(request.params.name);
      if (target) mayHandOut(request.principal, 'rotate', breadthOf(target.record));
      const { record, key } = await keys.rotate(request.params.name);
      log.warn({ name: record.name, hint: record.hint }, 'API key rotated; its previous secret no longer works');
      return secret(reply).send({ ...show(record), key });
    },
  );

  app.get('/system/usage', { config: { scope: 'system:read' } }, async () => ({ keys: usage.all() }));
}
