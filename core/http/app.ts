/**
 * Builds the Fastify app: the HTTPS server (credentials applied later by {@link applyTls}), the
 * logger, the route schemas' compilers (compiled on first use), the error handler, the security
 * headers and CORS, the auth gate, 404/405, the public `/health`, and every enabled plugin. It
 * does not listen: tests `inject()` into it, `core/main.ts` starts it.
 *
 * @module
 */
import https from 'node:https';
import AjvCompiler from '@fastify/ajv-compiler';
import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from '../config/schema.js';
import type { TlsCredentials } from '../contracts/tls.js';
import { Errors } from '../errors.js';
import { LogHub, REDACT_PATHS } from '../logging.js';
import { createHooks, type Hooks } from '../plugin/hooks.js';
import { loadPlugins, registerPlugins, type LoadedPlugin } from '../plugin/host.js';
import { VERSION } from '../version.js';
import { installAuthGate } from './auth.js';
import { installConnectionGuard, serverTimeouts } from './connections.js';
import { DEFAULT_SHUTDOWN_GRACE_MS, installDrain, type Drain } from './drain.js';
import { createClientErrorHandler, createErrorHandler, createFrameworkErrorHandler } from './error-handler.js';
import { installRouting, RouteTable } from './routing.js';
import { registerSecurityHeaders } from './security-headers.js';
import { TLS_POLICY } from './tls-policy.js';

export interface BuiltApp {
  app: FastifyInstance;
  /** The shutdown drain: stop accepting, give requests in flight `shutdownGraceMs` (./drain.ts). */
  drain: Drain;
  hooks: Hooks;
  routes: RouteTable;
  plugins: LoadedPlugin[];
}

export interface BuildOptions {
  /** Plugins to register instead of loading the config's (tests). */
  plugins?: LoadedPlugin[];
  /** Where log lines go besides the service buffers. Defaults to stdout; null for nowhere. */
  logDestination?: NodeJS.WritableStream | null;
  /** Environment for plugin option overrides (`LIA_*`). Defaults to `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Where operator-facing console text (banner, rotation notice) goes. Defaults to stdout. */
  console?: (text: string) => void;
}

/**
 * Where pino's JSON lines go: straight to `destination`, or through pino-pretty (one readable line
 * each: time, level, message, fields) when `logFormat` is `pretty`, or `auto` and the destination
 * is a terminal. The service buffers (`/system/logs`) read the JSON before it is prettified.
 */
async function logOutput(config: Config, destination: NodeJS.WritableStream | null): Promise<NodeJS.WritableStream | null> {
  const tty = destination === process.stdout && process.stdout.isTTY === true;
  const format = config.logFormat ?? 'auto';
  if (!destination || format === 'json' || (format === 'auto' && !tty)) return destination;
  const { default: pretty } = await import('pino-pretty');
  return pretty({ destination, colorize: tty, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', sync: true });
}

/** Parses any body as JSON, as Ollama does (curl's `-d` sends form encoding by default). */
function parseJsonBody(_req: unknown, body: string, done: (err: Error | null, value?: unknown) => void): void {
  if (body.length === 0) return done(null, undefined);
  try {
    done(null, JSON.parse(body));
  } catch (err) {
    done(Errors.invalidJson(`the body is not valid JSON: ${(err as Error).message}`));
  }
}

/**
 * Ajv options of route schemas. Fastify's defaults coerce types (`"5"` → 5) and strip unknown
 * properties; here a value of the wrong type is a 400, as in Ollama and OpenAI, and unknown fields
 * reach the handler untouched (both APIs ignore them). No schema defaults are filled in: handlers
 * apply their documented defaults, so `null` can keep meaning "not set". One error at a time
 * (`allErrors` is a denial-of-service risk); `verbose` gives the error handler the failing
 * schema, whose `errorMessage` (a string, or one per keyword) replaces the generated text.
 */
export const AJV_OPTIONS = {
  coerceTypes: false,
  removeAdditional: false,
  useDefaults: false,
  allErrors: false,
  verbose: true,
  keywords: ['errorMessage'],
} as const;

/*
 * Route schemas are compiled on their first use instead of at start. Fastify compiles every
 * route's validator (Ajv) and serializer (fast-json-stringify) while the app becomes ready; for
 * the request schemas of the inference APIs that is a fifth of the start
 * (bench/results/2026-11-27-code-notes.md), for routes a given appliance may never serve. The
 * compilers are Fastify's own (`@fastify/ajv-compiler`, `@fastify/fast-json-stringify-compiler`)
 * with the same options; only the moment changes: the first request of each route pays its compile.
 */
type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions['schemaController']>['compilersFactory']>;

/** A validator that compiles on its first call and exposes the compiled one's `errors`, as Fastify reads them. */
function lazyValidator(compile: () => (data: unknown) => unknown): (data: unknown) => unknown {
  let compiled: (((data: unknown) => unknown) & { errors?: unknown }) | undefined;
  const validate = (data: unknown): unknown => {
    compiled ??= compile();
    const result = compiled(data);
    validate.errors = compiled.errors;
    return result;
  };
  validate.errors = undefined as unknown;
  return validate;
}

function lazySerializer(compile: () => (data: unknown) => string): (data: unknown) => string {
  let compiled: ((data: unknown) => string) | undefined;
  return (data) => (compiled ??= compile())(data);
}

/** Fastify's `schemaController.compilersFactory`, deferring each compile to the route's first use. */
export function lazyCompilers(): CompilersFactory {
  const validators = AjvCompiler() as unknown as (...args: unknown[]) => (route: unknown) => (data: unknown) => unknown;
  const serializers = SerializerSelector() as unknown as (...args: unknown[]) => (route: unknown) => (data: unknown) => string;
  return {
    buildValidator: ((...args: unknown[]) => {
      const compiler = validators(...args);
      return (route: unknown) => lazyValidator(() => compiler(route));
    }) as unknown as CompilersFactory['buildValidator'],
    buildSerializer: (...args: unknown[]) => {
      const compiler = serializers(...args);
      return (route: unknown) => lazySerializer(() => compiler(route));
    },
  };
}

export async function buildApp(config: Config, options: BuildOptions = {}): Promise<BuiltApp> {
  const logs = new LogHub();
  const destination = await logOutput(config, options.logDestination === undefined ? process.stdout : options.logDestination);
  const hooks = createHooks(logs, options.console ?? ((text) => process.stdout.write(text)), config.services ?? []);
  const app = Fastify({
    // Fastify applies its server timeouts only to servers it creates itself, so the factory sets
    // them: per phase (handshake, headers, keep-alive), none on a whole request (./connections.ts).
    serverFactory: (handler) => https.createServer({ ...TLS_POLICY, ...serverTimeouts(config) }, handler),
    logger: {
      level: config.logLevel,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      stream: logs.stream(destination),
    },
    bodyLimit: config.bodyLimit,
    ajv: { customOptions: { ...AJV_OPTIONS, keywords: [...AJV_OPTIONS.keywords] } },
    schemaController: { compilersFactory: lazyCompilers() },
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
    // Router failures (bad percent-encoding, an over-long parameter) and unparsable requests are
    // answered in the surface's error format like every other error.
    frameworkErrors: createFrameworkErrorHandler(hooks.errorFormats),
    clientErrorHandler: createClientErrorHandler(hooks.errorFormats),
  }) as unknown as FastifyInstance;

  // Caps the connections without a key, so idle sockets cannot exhaust file descriptors.
  installConnectionGuard(app.server as https.Server, config, app.log);
  const routes = new RouteTable();
  app.setErrorHandler(createErrorHandler(hooks.errorFormats));
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, parseJsonBody);
  // Before the route table and the auth gate: their headers reach 401s and 404s, a CORS preflight
  // is answered before the gate, and @fastify/cors's catch-all OPTIONS route stays out of the
  // table (it only answers preflights; any other OPTIONS request meets the gate, then 404/405).
  await registerSecurityHeaders(app, config.corsOrigins ?? []);
  installRouting(app, routes);
  // Before the auth gate: a request arriving during the shutdown drain gets 503 at once.
  const drain = installDrain(app);
  // A close without the drain first (tests, a failed start) still ends within the grace period.
  app.addHook('preClose', async () => {
    await drain.run(config.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS);
  });
  installAuthGate(app, hooks);
  // Once every plugin is registered: one backend per model format, as the config's `backends` picks.
  app.addHook('onReady', async () => hooks.backends.configure(config.backends ?? {}, config.source ?? 'the configuration'));

  installProxyRole(app, hooks);
  installRequestObservers(app, hooks);

  app.get('/health', { config: { public: true } }, async (_request, reply) => {
    const services = hooks.services.list();
    const down = services.filter((s) => s.implemented && s.required && s.state !== 'active');
    const body = {
      status: down.length === 0 ? 'ok' : 'degraded',
      version: VERSION,
      services: Object.fromEntries(services.map((s) => [s.name, s.implemented ? s.state : 'inactive'])),
    };
    return reply
      .code(down.length === 0 ? 200 : 503)
      .header('Cache-Control', 'no-store')
      .send(body);
  });

  const plugins = options.plugins ?? (await loadPlugins(config, options.env ?? process.env));
  await registerPlugins(app, plugins, config, hooks);
  return { app, drain, hooks, routes, plugins };
}

/**
 * `svc-proxy` in the embedded default is the HTTPS front door itself. Stopping it makes every
 * request but `/health` answer 503 (the management API refuses that without `force`, since it
 * locks the operator out); starting it opens the door again.
 */
function installProxyRole(app: FastifyInstance, hooks: Hooks): void {
  let open = false;
  hooks.services.declare({ name: 'svc-proxy', description: 'LIA HTTPS front end (TLS termination and routing)' }, 'core');
  hooks.services.implement('svc-proxy', {
    async start() {
      open = true;
    },
    async stop() {
      open = false;
    },
  });
  app.addHook('onRequest', async (request) => {
    if (!open && request.routeOptions.url !== '/health') throw Errors.unavailable('svc-proxy is stopped: the appliance is not accepting requests');
  });
}

/**
 * Tells `hooks.requestObservers` of every answered request. Added on the root context, so it runs
 * for every plugin's routes and for 404s; an observer that throws is ignored (it only counts).
 */
function installRequestObservers(app: FastifyInstance, hooks: Hooks): void {
  const observers = hooks.requestObservers.list(); // the live list (see Registry.list)
  app.addHook('onResponse', (request, reply, done) => {
    if (observers.length > 0) {
      const record = {
        method: request.method,
        route: request.routeOptions.url ?? '(unmatched)',
        statusCode: reply.statusCode,
        seconds: reply.elapsedTime / 1000,
      };
      for (const o of observers) {
        try {
          o.onResponse(record);
        } catch {
          // An observer's failure must not touch the request.
        }
      }
    }
    done();
  });
}

/** Applies credentials with the whole TLS policy (see tls-policy.ts for why both). */
export function applyTls(app: FastifyInstance, credentials: TlsCredentials): void {
  (app.server as https.Server).setSecureContext({ ...TLS_POLICY, key: credentials.key, cert: credentials.cert });
}
