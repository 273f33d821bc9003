/**
 * `lia serve`: runs the appliance in the foreground (embedded default: every service in this
 * process). SIGINT/SIGTERM drain (new requests get 503, those in flight get `shutdownGraceMs`),
 * stop the services, flush the stores and exit 0; a second signal during the drain exits at once
 * (128 + the signal's number). A configuration error exits 2 with a message that names the key
 * and the file.
 *
 * @module
 */
import os from 'node:os';
import { ConfigError, loadConfig } from '../../config/load.js';
import { attach } from '../attach.js';
import { startAppliance } from '../../main.js';
import type { CliCommand } from '../types.js';

export const commands: CliCommand[] = [
  {
    name: 'serve',
    summary: 'Run the appliance (HTTPS on port 8443 by default)',
    usage: 'lia serve [--host ADDR] [--port N] [--data-dir DIR] [--config FILE] [--service NAME]',
    options: {
      host: { type: 'string' },
      port: { type: 'string' },
      'data-dir': { type: 'string' },
      config: { type: 'string', short: 'c' },
      /**
       * Under systemd, which unit this process is: `svc-proxy` runs the appliance; any other
       * service attaches to it and drives its role (core/cli/attach.ts). The name must be one of
       * the configuration's `services`.
       */
      service: { type: 'string' },
    },
    async run({ values }, io) {
      let config;
      try {
        config = await loadConfig({
          env: io.env,
          configFile: values['config'] as string | undefined,
          flags: { host: values['host'] as string | undefined, port: values['port'] as string | undefined, dataDir: values['data-dir'] as string | undefined },
        });
      } catch (err) {
        if (err instanceof ConfigError) {
          io.stderr.write(`lia: invalid configuration: ${err.message}\n`);
          return err.exitCode;
        }
        throw err;
      }
      const service = values['service'] as string | undefined;
      if (service !== undefined && !config.services.includes(service)) {
        io.stderr.write(`lia: --service: unknown service "${service}"\n`);
        return 2;
      }
      if (service !== undefined && service !== 'svc-proxy') return attach(service, config.dataDir, io);
      let appliance;
      try {
        appliance = await startAppliance(config, { console: (t) => io.stdout.write(t) });
      } catch (err) {
        if (err instanceof ConfigError) {
          io.stderr.write(`lia: invalid configuration: ${err.message}\n`);
          return err.exitCode;
        }
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EADDRINUSE' || code === 'EACCES') {
          io.stderr.write(`lia: cannot listen on ${config.host}:${config.port}: ${code}\n`);
          return 1;
        }
        throw err;
      }
      return await new Promise<number>((resolve) => {
        let stopping = false;
        // `on`, not `once`: a library that re-raises a signal when no other listener is left
        // (signal-exit, loaded with node-llama-cpp) would otherwise kill the drain at once.
        const onSignal = (signal: NodeJS.Signals): void => {
          if (stopping) {
            appliance.app.log.warn(`${signal} received again: exiting at once`);
            process.exit(128 + (os.constants.signals[signal] ?? 0));
          }
          stopping = true;
          appliance.app.log.info(`${signal} received: shutting down (a second signal exits at once)`);
          appliance.close().then(
            () => resolve(0),
            (err: unknown) => {
              appliance.app.log.error({ err }, 'shutdown failed');
              resolve(1);
            },
          );
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
      });
    },
  },
];
