/**
 * Response headers that make browsers treat the appliance safely, and CORS for the origins the
 * operator allows. Both are registered before the auth gate, so a 401, a 404 or a preflight gets
 * them too.
 *
 * - Every response carries HSTS (one year, no `includeSubDomains`, no preload: the appliance
 *   answers for its own name only), `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY`,
 *   `Referrer-Policy: no-referrer` and a Content-Security-Policy that allows nothing
 *   (`default-src 'none'; frame-ancestors 'none'`), which suits JSON, and helmet's other defaults
 *   (the cross-origin opener and resource policies, `Origin-Agent-Cluster`, no DNS prefetch, no
 *   cross-domain policy files, `X-XSS-Protection: 0`). A route that serves a page sets its own CSP
 *   (the web UI does), and that one wins.
 * - The headers are helmet's, for the options below, worked out once at start: they depend on
 *   nothing in the request, and @fastify/helmet would build helmet's middleware again for each
 *   request (a tenth of a millisecond, on the first token's path).
 * - CORS is off unless `corsOrigins` lists origins (`LIA_ORIGINS`, comma-separated). A preflight
 *   from a listed origin is answered 204 without a key (browsers send none with it); every other
 *   request still needs the key. An origin not listed gets no `Access-Control-*` header at all.
 *
 * @module
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import cors from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import helmet, { type HelmetOptions } from 'helmet';

/** HSTS max-age: one year, in seconds. */
export const HSTS_MAX_AGE = 31_536_000;

/** What a browser client of the APIs needs: the methods, the headers it sends, those it reads. */
export const CORS_POLICY = {
  methods: ['GET', 'POST', 'DELETE', 'HEAD'],
  allowedHeaders: ['Authorization', 'Content-Type', 'x-api-key'],
  exposedHeaders: ['Retry-After', 'WWW-Authenticate', 'Content-Disposition', 'X-Certificate-Fingerprint-SHA256'],
  /** Seconds a browser may cache a preflight answer. */
  maxAge: 600,
} as const;

/** What helmet is asked for. */
const HELMET_OPTIONS: HelmetOptions = {
  strictTransportSecurity: { maxAge: HSTS_MAX_AGE, includeSubDomains: false, preload: false },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  contentSecurityPolicy: { useDefaults: false, directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"] } },
};

/** The headers helmet's middleware sets for `options`, recorded from one run of it. */
function helmetHeaders(options: HelmetOptions): Record<string, string> {
  const headers: Record<string, string> = {};
  const res = {
    setHeader: (name: string, value: unknown) => void (headers[name] = String(value)),
    removeHeader: (name: string) => void delete headers[name],
  };
  let failure: Error | undefined;
  helmet(options)({} as IncomingMessage, res as unknown as ServerResponse, (err?: unknown) => {
    if (err) failure = err instanceof Error ? err : new Error('helmet refused its options');
  });
  if (failure) throw failure;
  return headers;
}

/**
 * The headers of every answer, helmet's for {@link HELMET_OPTIONS}; also sent on the answers
 * Fastify makes before any hook runs (a path that is not valid percent-encoding, an over-long
 * route parameter, a request Node cannot parse).
 */
export const EARLY_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze(helmetHeaders(HELMET_OPTIONS));

/** Registers the security headers and, when `origins` is not empty, CORS for those origins. */
export async function registerSecurityHeaders(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  const headers = Object.entries(EARLY_SECURITY_HEADERS);
  app.addHook('onRequest', (_request, reply, done) => {
    for (const [name, value] of headers) reply.raw.setHeader(name, value);
    done();
  });
  if (origins.length === 0) return;
  const allowed = new Set(origins);
  const policy = {
    ...CORS_POLICY,
    methods: [...CORS_POLICY.methods],
    allowedHeaders: [...CORS_POLICY.allowedHeaders],
    exposedHeaders: [...CORS_POLICY.exposedHeaders],
  };
  await app.register(cors, {
    // Per request: a listed origin gets the policy; anything else (no Origin, another origin, an
    // OPTIONS request that is not a preflight) gets nothing from this plugin and meets the gate.
    delegator: (request: FastifyRequest, callback: (err: Error | null, options: object) => void) => {
      const origin = request.headers.origin;
      const listed = typeof origin === 'string' && allowed.has(origin);
      const preflightOrOther = request.method !== 'OPTIONS' || request.headers['access-control-request-method'] !== undefined;
      callback(null, listed && preflightOrOther ? { ...policy, origin } : { origin: false });
    },
  });
}
