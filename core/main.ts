/**
 * Starts the appliance in its embedded default: every enabled plugin in this process, the
 * services started in order, TLS applied, HTTPS listening, the boot banner printed. Returns a
 * handle whose `close()` drains the server (new requests get 503, those in flight get
 * `shutdownGraceMs`), then stops the services and closes every plugin (stores flushed).
 * With `listen: false` it does all of that but open a socket: no HTTPS listener and no control
 * socket, the app answering through `app.inject()` (`lia/testing`'s route tier).
 *
 * @module
 */
import { mkdir } from 'node:fs/promises';
import { ConfigError } from './config/load.js';
import type { Config } from './config/schema.js';
import { DEFAULT_SHUTDOWN_GRACE_MS } from './http/drain.js';
import { applyTls, buildApp, type BuildOptions, type BuiltApp } from './http/app.js';
import { bootBanner } from './banner.js';
import { openControlSocket } from './services/control-socket.js';

export interface Appliance extends BuiltApp {
  /** The port actually bound (differs from config.port when that is 0); 0 when not listening. */
  port: number;
  close(): Promise<void>;
}

export interface StartOptions extends BuildOptions {
  /**
   * Open the HTTPS listener and the control socket. With false the appliance is otherwise the
   * same (plugins set up, services started, TLS applied, banner printed) and is reached only
   * through `app.inject()`: tests that need no socket, several appliances in one process without
   * ports. Defaults to true.
   */
  listen?: boolean;
}

export async function startAppliance(config: Config, options: StartOptions = {}): Promise<Appliance> {
  const { listen: listening = true, ...buildOptions } = options;
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const built = await buildApp(config, buildOptions);
  const { app, hooks } = built;
  let closeControl: (() => Promise<void>) | null = null;
  try {
    await ready(built, config);
    await hooks.services.startAll();
    applyTls(app, hooks.tls.get().current());
    hooks.tls.get().onChange((credentials) => {
      applyTls(app, credentials);
      app.log.info({ svc: 'svc-certs' }, 'TLS certificate swapped in without restart');
    });
    if (listening) {
      await listen(app, config);
      closeControl = await openControlSocket(config.dataDir, hooks.services);
    }
  } catch (err) {
    await hooks.services.stopAll();
    await app.close();
    throw err;
  }
  const address = app.server.address();
  const port = !listening ? 0 : typeof address === 'object' && address ? address.port : config.port;
  hooks.console(bootBanner(built, config, port));

  let closing: Promise<void> | null = null;
  return {
    ...built,
    port,
    close() {
      closing ??= (async () => {
        const graceMs = config.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
        app.log.info({ inFlight: built.drain.inFlight(), graceMs }, `draining: new requests get 503, requests in flight get ${graceMs / 1000} s`);
        await closeControl?.();
        const { inFlight, aborted } = await built.drain.run(graceMs);
        if (aborted > 0) app.log.warn({ aborted }, `${aborted} request(s) still running at the end of the grace period were ended with an error`);
        app.log.info({ inFlight, aborted }, 'drained: every connection is closed; services stopping');
        const errors = await hooks.services.stopAll();
        // Every plugin's onClose: the engine stops its runners, the stores write what they hold.
        await app.close();
        for (const err of errors) app.log.error({ err }, 'service failed to stop');
        app.log.info('services stopped; stores flushed: stopped');
      })();
      return closing;
    },
  };
}

/**
 * Listens on the configured address. `::` is dual stack (IPv4 arrives as mapped addresses); on a
 * kernel without IPv6 it cannot be bound, and the appliance falls back to every IPv4 interface.
 */
async function listen(app: BuiltApp['app'], config: Config): Promise<void> {
  try {
    await app.listen({ host: config.host, port: config.port, ipv6Only: false, listenTextResolver });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (config.host !== '::' || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw err;
    app.log.warn({ code }, 'IPv6 is not available: listening on 0.0.0.0 (IPv4 only)');
    await app.listen({ host: '0.0.0.0', port: config.port, listenTextResolver });
  }
}

/**
 * The start line. Fastify builds the address from its own `https` option, which is unset because
 * core creates the HTTPS server itself, so it would say `http://`; every LIA server is HTTPS.
 */
function listenTextResolver(address: string): string {
  return `listening at ${address.replace(/^http:/, 'https:')}`;
}

/** Runs every plugin's setup; a configuration that leaves the appliance without TLS is a ConfigError. */
async function ready({ app, hooks }: BuiltApp, config: Config): Promise<void> {
  await app.ready();
  if (!hooks.tls.provided) {
    throw new ConfigError(
      `${config.source ?? 'the default configuration'}: no enabled plugin provides TLS ("tls"), and LIA serves only HTTPS; enable a plugin that provides it`,
    );
  }
}
