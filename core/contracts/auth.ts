/**
 * Auth strategy contract. Core asks every registered strategy, in registration order, whether a
 * request's credentials are good; the first one that recognises them wins. A route is public only
 * when it declares `config: { public: true }`; every other route, and every unknown path, needs a
 * principal, whatever the spelling of the path, and a route's principal must hold its scope.
 *
 * @module
 */
import type { FastifyRequest } from 'fastify';

/** Who made the request. */
export interface Principal {
  /** Stable id of the credential, e.g. `master`. Never the secret itself. */
  id: string;
  /**
   * What the credential may do; `*` is everything. Core's auth gate checks them against the scope
   * each route declares, with the implication rule of `core/http/auth.ts`, unless the principal
   * answers {@link Principal.hasScope} itself.
   */
  scopes: readonly string[];
  /**
   * Whether the credential may use a route that needs `scope`. Absent: core's rule over
   * {@link Principal.scopes} (`*` grants all; `<area>:<level>` also grants `<area>:read`).
   */
  hasScope?(scope: string): boolean;
  /** A display name for usage and logs (`master`, a named key's name). Defaults to `id`. */
  name?: string;
  /**
   * The models this credential is limited to, as its strategy writes them (for listings and
   * usage; `auth-api-key` writes glob patterns). Absent or null: every model. Core enforces the
   * limit through {@link Principal.mayUse}; a principal with a list and no `mayUse` may use no
   * model.
   */
  models?: readonly string[] | null;
  /**
   * Whether the credential may use `model`. The engine asks wherever a model is named for
   * inference (403 naming the model), and listings show only the models it admits. Absent: every
   * model (see {@link Principal.models}).
   */
  mayUse?(model: string): boolean;
  /**
   * Called by the engine before an inference request on `model` starts (after the allow-list):
   * throws a typed error to refuse it (429 past a rate limit, with `Retry-After`), or returns
   * what the engine calls once the request is over (stream ended, failed or abandoned): a function,
   * or an {@link Admission} that may also cap the tokens generated. Absent: no limits.
   */
  admit?(model: string, ask?: AdmissionAsk): Admission | (() => void);
  /**
   * Aborted when the credential stops being valid (revoked or rotated): the engine ends the
   * principal's running generations with its reason (an error frame on a started stream).
   * Absent: the credential is never withdrawn while requests run.
   */
  signal?: AbortSignal;
}

/** What an inference request may use, as the engine tells `Principal.admit` before it starts. */
export interface AdmissionAsk {
  /** The prompt's tokens, estimated from its length before it is tokenized. */
  promptTokens: number;
  /** The most tokens the request asks to generate (`num_predict`, `max_tokens`); null when unbounded; 0 for embeddings. */
  maxTokens: number | null;
}

/** An admitted request: its release, and the cap the principal puts on what it generates. */
export interface Admission {
  /** At most this many tokens are generated (the engine lowers `num_predict` to it). Absent: no cap. */
  maxTokens?: number;
  /** Called once the request is over, with the tokens it used (prompt and generated) when known. */
  release(usedTokens?: number): void;
}

/** The outcome of one strategy for one request. */
export type AuthResult =
  /** The credentials are good. */
  | { kind: 'ok'; principal: Principal }
  /** The request carries no credential this strategy understands. */
  | { kind: 'absent' }
  /** A credential this strategy owns, but wrong; `reason` goes to the client (never the key). */
  | { kind: 'invalid'; reason: string };

export interface AuthStrategy {
  readonly name: string;
  authenticate(request: FastifyRequest): Promise<AuthResult> | AuthResult;
}

/**
 * Key storage behind the master-key strategy. Only digests are kept; more keys (scoped,
 * revocable) can come later behind the same interface.
 */
export interface KeyStore {
  /** Checks a presented secret in constant time. */
  verify(secret: string): Principal | null;
  /** Replaces the master key; returns the new secret once. */
  rotateMaster(): Promise<{ key: string; hint: string }>;
  /** Where the master key lives on disk (shown in the boot banner). */
  readonly masterKeyPath: string;
}
