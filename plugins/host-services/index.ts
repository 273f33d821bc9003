/**
 * The `host-services` plugin (service `svc-system-api`): the management API's host side. It fills
 * the `serviceManager` hook with the embedded supervisor (the six services are roles of this
 * process) or with systemd (`systemctl`/`journalctl`), chosen by the `manager` option or detected,
 * keeps the status figures fresh in the background, writes the per-service log files in the
 * embedded default, and serves `/system/status`, `/system/services`, `/system/logs` and
 * `/system/network`.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { definePlugin, Errors } from 'lia/plugin';
import type { LogLine } from 'lia/plugin/contracts';
import type { ServiceManager } from './public.js';
import { LogFiles } from './log-files.js';
import { EmbeddedServiceManager } from './managers/embedded.js';
import { SystemdServiceManager } from './managers/systemd.js';
import { logsRoutes } from './routes/logs.js';
import { networkRoutes } from './routes/network.js';
import { servicesRoutes } from './routes/services.js';
import { statusRoutes } from './routes/status.js';
import { StatusSampler } from './status/sampler.js';

const options = Type.Object(
  {
    /**
     * `auto` (systemd when this process was started by systemd, else embedded), `embedded` or
     * `systemd`. Defaults to `auto`.
     */
    manager: Type.Union([Type.Literal('auto'), Type.Literal('embedded'), Type.Literal('systemd')], { default: 'auto' }),
    /** The systemctl executable. Defaults to `systemctl`. */
    systemctl: Type.String({ default: 'systemctl', minLength: 1 }),
    /** The journalctl executable. Defaults to `journalctl`. */
    journalctl: Type.String({ default: 'journalctl', minLength: 1 }),
    /** Deadline of one systemctl/journalctl call in ms. Defaults to 10000. */
    timeoutMs: Type.Integer({ default: 10_000, minimum: 100 }),
    /** Milliseconds between status samples (CPU, memory, disk). Defaults to 2000. */
    statusIntervalMs: Type.Integer({ default: 2000, minimum: 250 }),
    /** The model store's folder, whose file system `disk.models` reports. Defaults to `<dataDir>/models`. */
    modelsDir: Type.String({ default: '' }),
    /** Keep per-service log files in `<dataDir>/logs` (embedded manager). Defaults to true. */
    logFiles: Type.Boolean({ default: true }),
    /** Size at which a service's log file rotates, in bytes. Defaults to 5 MiB. */
    logFileMaxBytes: Type.Integer({ default: 5 * 1024 * 1024, minimum: 4096 }),
    /** Rotated files kept per service. Defaults to 3. */
    logFileKeep: Type.Integer({ default: 3, minimum: 1, maximum: 20 }),
  },
  { additionalProperties: false },
);

/** True when systemd runs the machine and started this process (sd_booted() plus INVOCATION_ID). */
export function startedBySystemd(env: NodeJS.ProcessEnv = process.env): boolean {
  return existsSync('/run/systemd/system') && typeof env['INVOCATION_ID'] === 'string' && env['INVOCATION_ID'] !== '';
}

/** The host-services plugin. */
export default definePlugin({
  name: 'host-services',
  apiVersion: 2,
  provides: ['serviceManager'],
  uses: ['network', 'tls'],
  description: 'Management API (svc-system-api): status, services, logs, network; embedded supervisor or systemd',
  services: [{ name: 'svc-system-api', description: 'Management API: status, services, logs and network' }],
  options,
  env: { LIA_SERVICE_MANAGER: 'manager' },
  commands: async () => (await import('./cli/commands.js')).commands,
  async setup(app, ctx) {
    const { hooks, config } = ctx;
    const o = ctx.options;
    const kind = o.manager === 'auto' ? (startedBySystemd() ? 'systemd' : 'embedded') : o.manager;

    let manager: ServiceManager;
    if (kind === 'systemd') {
      manager = new SystemdServiceManager({ systemctl: o.systemctl, journalctl: o.journalctl, timeoutMs: o.timeoutMs, names: () => hooks.services.names() });
    } else {
      let history = new Map<string, LogLine[]>();
      if (o.logFiles) {
        const files = new LogFiles({ dir: path.join(config.dataDir, 'logs'), maxBytes: o.logFileMaxBytes, keep: o.logFileKeep });
        const names = hooks.services.names();
        history = await files.open(names, 10_000);
        // Lines logged before this plugin was set up are in the buffers only: file them first.
        for (const name of names) for (const line of hooks.logs.tail(name, 10_000)) files.write(name, line);
        hooks.logs.onLine((service, line) => {
          if (hooks.services.has(service)) files.write(service, line);
        });
        app.addHook('onClose', async () => files.flushed());
      }
      manager = new EmbeddedServiceManager(hooks.services, hooks.logs, history);
    }
    hooks.extensions.provide('serviceManager', manager, 'host-services');

    const sampler = new StatusSampler({
      modelsDir: o.modelsDir || path.join(config.dataDir, 'models'),
      diskPaths: ['/', config.dataDir],
      intervalMs: o.statusIntervalMs,
    });
    hooks.services.implement('svc-system-api', {
      async start() {
        await sampler.start();
        if (sampler.lastError) ctx.log.warn({ error: sampler.lastError }, 'some status figures could not be read');
        ctx.log.info({ manager: manager.kind }, 'management API started');
      },
      async stop() {
        sampler.stop();
        ctx.log.info('management API stopped');
      },
    });
    app.addHook('onClose', async () => sampler.stop());

    // While svc-system-api is stopped (forced), everything here answers 503 except the action
    // route, so the operator can start it again.
    app.addHook('onRequest', async (request) => {
      if (hooks.services.isActive('svc-system-api')) return;
      if (request.method === 'POST' && request.routeOptions.url?.startsWith('/system/services/')) return;
      throw Errors.unavailable('svc-system-api is stopped; start it with POST /system/services/svc-system-api/start');
    });

    statusRoutes(app, sampler, hooks);
    servicesRoutes(app, () => hooks.extensions.get('serviceManager'), hooks.services);
    logsRoutes(app, () => hooks.extensions.get('serviceManager'), hooks.services);
    networkRoutes(app, hooks, config.host);
  },
});
