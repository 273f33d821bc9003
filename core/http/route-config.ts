/**
 * What core adds to Fastify's types: the route options every plugin sets (`config.public`,
 * `config.scope`) and the principal on each request. A module of types only; the public entry
 * imports it so that plugin authors' route options type-check against `lia/plugin`.
 *
 * @module
 */
import type { Principal } from '../contracts/auth.js';
import type { Scope } from './auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who made the request; null on public routes. */
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    /** The route needs no API key (`/health`, `/system/ca-cert`, the web UI). Defaults to false. */
    public?: boolean;
    /**
     * The scope a principal needs for this route (`models:read`, `inference`, …; see
     * `core/http/auth.ts`). Defaults to `*`: only a principal holding every scope.
     */
    scope?: Scope;
    /**
     * Request headers that carry the API key on this route besides `Authorization: Bearer`
     * (`x-api-key` on Anthropic's routes). Auth strategies read a key there only on routes that
     * declare it. Defaults to none.
     */
    credentialHeaders?: readonly string[];
  }
}

export {};
