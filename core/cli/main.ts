/**
 * `lia`: the command-line entry. Commands come from core (`core/cli/commands/`: `serve`,
 * `plugins`) and from every plugin the configuration enables (the `commands` of its definition),
 * so a disabled plugin's commands disappear and a third-party plugin can add its own. The command
 * is the one named by the first one or two words; its flags are parsed with `node:util`
 * `parseArgs`.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { importEnabledPlugins } from '../plugin/host.js';
import { VERSION } from '../version.js';
import { clientFromEnv } from './client.js';
import { commands as coreCommands } from './commands/index.js';
import { isCliError, type CliCommand, type CliIO } from './types.js';

/** The value of a global flag (`--config F`, `--config=F`) read before the command is known. */
function flagValue(argv: string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === `--${name}`) return argv[i + 1];
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return undefined;
}

/** Core's commands, then each enabled plugin's, in config order. */
async function loadCommands(config: Config): Promise<CliCommand[]> {
  const all: CliCommand[] = [...coreCommands];
  for (const { spec } of await importEnabledPlugins(config)) all.push(...((await spec.commands?.()) ?? []));
  return all;
}

function help(commands: CliCommand[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    `lia ${VERSION} — Local Inference Appliance`,
    '',
    'Usage: lia <command> [options]',
    '',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Commands other than serve talk to a running appliance over HTTPS:',
    '  LIA_URL      appliance address (default https://localhost:8443); or --url',
    '  LIA_API_KEY  API key (default: the key file in the data directory)',
    '  LIA_CA_CERT  CA certificate to trust (default: the CA in the data directory)',
    '',
    'Run "lia <command> --help" for the options of one command.',
  ].join('\n');
}

export async function main(argv: string[], io: Partial<CliIO> = {}): Promise<number> {
  const env = io.env ?? process.env;
  const out = io.stdout ?? process.stdout;
  const err = io.stderr ?? process.stderr;
  let config: Config;
  let commands: CliCommand[];
  try {
    config = await loadConfig({ env, configFile: flagValue(argv, 'config'), flags: { dataDir: flagValue(argv, 'data-dir') } });
    commands = await loadCommands(config);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err.write(`lia: invalid configuration: ${e.message}\n`);
    return e.exitCode;
  }
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    out.write(help(commands) + '\n');
    return argv.length === 0 ? 2 : 0;
  }
  if (argv[0] === '--version' || argv[0] === '-v') {
    out.write(`lia ${VERSION}\n`);
    return 0;
  }
  const two = `${argv[0]} ${argv[1] ?? ''}`.trim();
  const command = commands.find((c) => c.name === two) ?? commands.find((c) => c.name === argv[0]);
  if (!command) {
    err.write(`lia: unknown command "${argv[0]}"\n\n${help(commands)}\n`);
    return 2;
  }
  const rest = argv.slice(command.name.split(' ').length);
  try {
    const { values, positionals } = parseArgs({
      args: rest,
      options: {
        help: { type: 'boolean', short: 'h' },
        url: { type: 'string' },
        config: { type: 'string', short: 'c' },
        'data-dir': { type: 'string' },
        ...command.options,
      },
      allowPositionals: true,
      strict: true,
    });
    if (values['help']) {
      out.write(`Usage: ${command.usage}\n\n${command.summary}\n`);
      return 0;
    }
    const fullIO: CliIO = {
      stdout: out,
      stderr: err,
      stdin: io.stdin ?? process.stdin,
      env,
      dataDir: config.dataDir,
      client: io.client ?? ((url) => clientFromEnv(env, config.dataDir, url ?? values['url'])),
    };
    return await command.run({ values, positionals }, fullIO);
  } catch (e) {
    if (isCliError(e)) {
      err.write(`lia ${command.name}: ${e.message}\n`);
      return e.exitCode;
    }
    if ((e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      err.write(`lia ${command.name}: ${(e as Error).message}\nUsage: ${command.usage}\n`);
      return 2;
    }
    throw e;
  }
}
