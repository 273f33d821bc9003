/**
 * Named keys: keys with a name, scopes, an optional model allow-list, expiry and limits, created,
 * rotated and revoked through `/system/api-keys`. The file `<data dir>/keys/named-keys.json`
 * (0600, replaced atomically) holds each key's SHA-256 digest and its settings, never the secret:
 * the secret is returned once, at creation or rotation. In memory the keys are indexed by digest,
 * so a request costs one hash and one map lookup however many keys exist, and the matching digest
 * is compared again in constant time.
 *
 * Changes run one at a time, and each takes effect in memory before its answer is sent: a revoked
 * or rotated secret is refused from the next request on.
 *
 * @module
 */
import { timingSafeEqual } from 'node:crypto';
import path from 'node:path';
import { Errors, type Principal } from 'lia/plugin';
import type { AdmissionAsk } from 'lia/plugin/contracts';
import { readTextOrNull, writeFileAtomic } from 'lia/utils';
import { KEY_SCOPES, modelAllowed } from './allow-list.js';
import { digestOf, generateKey, namedHint } from './key-store.js';
import { KeyLimiter, type KeyLimits } from './rate-limits.js';

/** What is stored of a key (snake_case, as the API shows it). */
export interface KeyRecord {
  name: string;
  /** Hex SHA-256 of the secret. */
  digest: string;
  hint: string;
  scopes: string[];
  models: string[] | null;
  expires_at: string | null;
  limits: KeyLimits | null;
  created_at: string;
}

/** A new key's settings, as `POST /system/api-keys` takes them. */
export interface KeySpec {
  name: string;
  scopes: string[];
  models?: string[] | null;
  expires_at?: string | null;
  limits?: KeyLimits | null;
}

/** A key as the appliance holds it: its record, principal and limiter. */
export interface NamedKey {
  readonly record: KeyRecord;
  readonly principal: Principal;
  readonly limiter: KeyLimiter;
  readonly expiresAt: number;
  /** `record.digest` as bytes, for the constant-time comparison. */
  readonly digest: Buffer;
  /** Aborts `principal.signal`: the key's running generations end with `reason`. */
  readonly withdraw: (reason: Error) => void;
}

export const NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,63}$';

/**
 * Names no key may take: `master` is the master key's, and `rotate` would make
 * `/system/api-keys/rotate` name both the master key's rotation and a key.
 */
export const RESERVED_NAMES: readonly string[] = ['master', 'rotate'];

/** The record behind each named key's principal (also after a rotation replaced it). */
const recordOf = new WeakMap<Principal, KeyRecord>();

/** The named key's record whose principal this is, or null for the master key or another strategy's principal. */
export function namedRecordOf(principal: Principal): KeyRecord | null {
  return recordOf.get(principal) ?? null;
}

/** The key's in-memory form; `limiter` is kept across a rotation (limits and their state stay). */
function load(record: KeyRecord, limiter = new KeyLimiter(record.limits)): NamedKey {
  const withdrawn = new AbortController();
  const models = record.models ? Object.freeze([...record.models]) : null;
  const principal: Principal = Object.freeze({
    id: record.name,
    name: record.name,
    scopes: Object.freeze([...record.scopes]),
    models,
    mayUse: (model: string) => modelAllowed(models, model),
    admit: (_model: string, ask?: AdmissionAsk) => limiter.admit(ask),
    signal: withdrawn.signal,
  });
  recordOf.set(principal, record);
  return {
    record,
    principal,
    limiter,
    expiresAt: record.expires_at ? Date.parse(record.expires_at) : Infinity,
    digest: Buffer.from(record.digest, 'hex'),
    withdraw: (reason) => withdrawn.abort(reason),
  };
}

export class NamedKeyStore {
  readonly file: string;
  readonly #byDigest = new Map<string, NamedKey>();
  readonly #byName = new Map<string, NamedKey>();
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(file: string) {
    this.file = file;
  }

  /** Loads `<dataDir>/keys/named-keys.json` (absent: no named keys). The directory must exist. */
  static async open(dataDir: string): Promise<NamedKeyStore> {
    const store = new NamedKeyStore(path.join(dataDir, 'keys', 'named-keys.json'));
    const text = readTextOrNull(store.file);
    if (text !== null) {
      let data: { keys?: KeyRecord[] };
      try {
        data = JSON.parse(text) as typeof data;
      } catch {
        throw new Error(`${store.file} is not valid JSON; fix or remove it (removing it revokes every named key)`);
      }
      for (const record of data.keys ?? []) store.#add(load(record));
    }
    return store;
  }

  #add(key: NamedKey): void {
    this.#byDigest.set(key.record.digest, key);
    this.#byName.set(key.record.name, key);
  }

  #remove(key: NamedKey): void {
    this.#byDigest.delete(key.record.digest);
    this.#byName.delete(key.record.name);
  }

  /** The key whose secret has this SHA-256, or null. */
  lookup(digest: Buffer): NamedKey | null {
    const key = this.#byDigest.get(digest.toString('hex'));
    if (!key) return null;
    return timingSafeEqual(key.digest, digest) ? key : null;
  }

  get(name: string): NamedKey | null {
    return this.#byName.get(name) ?? null;
  }

  list(): NamedKey[] {
    return [...this.#byName.values()];
  }

  /** Creates a key; resolves with its record and, once, its secret. */
  create(spec: KeySpec, now = new Date()): Promise<{ record: KeyRecord; key: string }> {
    return this.#serial(async () => {
      checkSpec(spec, now);
      if (this.#byName.has(spec.name)) throw Errors.conflict(`an API key named "${spec.name}" exists; revoke it first or pick another name`);
      const key = generateKey();
      const record: KeyRecord = {
        name: spec.name,
        digest: digestOf(key).toString('hex'),
        hint: namedHint(key),
        scopes: [...new Set(spec.scopes)],
        models: spec.models ?? null,
        expires_at: spec.expires_at ? new Date(spec.expires_at).toISOString() : null,
        limits: spec.limits && Object.keys(spec.limits).length > 0 ? { ...spec.limits } : null,
        created_at: now.toISOString(),
      };
      await this.#save([...this.#records(), record]);
      this.#add(load(record));
      return { record, key };
    });
  }

  /** Revokes a key: refused from the next request on; its running generations end. */
  revoke(name: string): Promise<void> {
    return this.#serial(async () => {
      const key = this.#need(name);
      // Out of memory first: whatever happens to the file, the key stops working now.
      this.#remove(key);
      key.withdraw(Errors.unauthorized(`the API key "${name}" was revoked`));
      await this.#save(this.#records());
    });
  }

  /**
   * Gives a key a new secret (the old one is refused at once, and the generations it started end);
   * settings and limits stay.
   */
  rotate(name: string): Promise<{ record: KeyRecord; key: string }> {
    return this.#serial(async () => {
      const old = this.#need(name);
      const key = generateKey();
      const record: KeyRecord = { ...old.record, digest: digestOf(key).toString('hex'), hint: namedHint(key) };
      this.#remove(old);
      try {
        await this.#save([...this.#records(), record]);
      } catch (err) {
        this.#add(old);
        throw err;
      }
      this.#add(load(record, old.limiter));
      old.withdraw(Errors.unauthorized(`the API key "${name}" was rotated; use its new secret`));
      return { record, key };
    });
  }

  #need(name: string): NamedKey {
    const key = this.#byName.get(name);
    if (!key) throw Errors.notFound(`no API key named "${name}"`);
    return key;
  }

  #records(): KeyRecord[] {
    return [...this.#byName.values()].map((k) => k.record);
  }

  async #save(records: KeyRecord[]): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify({ version: 1, keys: records }, null, 2) + '\n', { mode: 0o600 });
  }

  #serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.#queue.catch(() => undefined).then(fn);
    this.#queue = next;
    return next;
  }
}

/** Checks what a schema cannot: the scope vocabulary, the reserved name, a future expiry. */
function checkSpec(spec: KeySpec, now: Date): void {
  if (RESERVED_NAMES.includes(spec.name))
    throw Errors.badRequest(`the name "${spec.name}" is reserved (the master key, and its rotation route)`, { param: 'name' });
  if (!new RegExp(NAME_PATTERN).test(spec.name)) throw Errors.badRequest(`invalid key name: it must match ${NAME_PATTERN}`, { param: 'name' });
  for (const scope of spec.scopes) {
    if (!(KEY_SCOPES as readonly string[]).includes(scope)) {
      throw Errors.badRequest(`unknown scope "${scope}": expected one of ${KEY_SCOPES.join(', ')}`, { param: 'scopes' });
    }
  }
  if (spec.expires_at) {
    const t = Date.parse(spec.expires_at);
    if (!Number.isFinite(t)) throw Errors.badRequest('expires_at must be an ISO-8601 date and time', { param: 'expires_at' });
    if (t <= now.getTime()) throw Errors.badRequest('expires_at is in the past', { param: 'expires_at' });
  }
}
