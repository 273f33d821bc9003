/**
 * `lia plugins`: the plugins the configuration enables, with where each comes from and its
 * description. It reads the configuration as `lia serve` would, without starting anything.
 *
 * @module
 */
import { ConfigError, loadConfig } from '../../config/load.js';
import { importEnabledPlugins } from '../../plugin/host.js';
import type { CliCommand } from '../types.js';

export const pluginsCommand: CliCommand = {
  name: 'plugins',
  summary: 'List the plugins the configuration enables',
  usage: 'lia plugins [--config FILE]',
  async run({ values }, io) {
    try {
      const config = await loadConfig({ env: io.env, configFile: values['config'] as string | undefined });
      const plugins = await importEnabledPlugins(config);
      const width = Math.max(...plugins.map((p) => p.spec.name.length));
      for (const { spec, origin } of plugins) {
        io.stdout.write(`${spec.name.padEnd(width)}  ${spec.description}${origin === 'built-in' ? '' : ` (${origin})`}\n`);
      }
      return 0;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      io.stderr.write(`lia: invalid configuration: ${err.message}\n`);
      return err.exitCode;
    }
  },
};
