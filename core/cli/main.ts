/**
 * `lia`: the command-line entry. It finds the command named by the first one or two words,
 * parses its flags with `node:util` `parseArgs`, and runs it. Command modules live in
 * `core/cli/commands/` and export `commands: CliCommand[]`.
 *
 * @module
 */
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { VERSION } from '../version.js';
import { clientFromEnv } from './client.js';
import { dataDirFromEnv } from './data-dir.js';
import { CliError, type CliCommand, type CliIO } from './types.js';

const SOURCE = /\.(ts|js)$/;

/**
 * Core's commands (`core/cli/commands/*`) and those of every built-in plugin that ships a
 * `cli/commands` module: a plugin brings its own commands, as it brings its own routes.
 */
async function loadCommands(): Promise<CliCommand[]> {
  const urls: URL[] = [];
  const coreDir = new URL('./commands/', import.meta.url);
  for (const f of (await readdir(coreDir)).sort()) if (SOURCE.test(f) && !f.endsWith('.d.ts') && !f.includes('.test.')) urls.push(new URL(f, coreDir));
  const pluginsDir = new URL('../../plugins/', import.meta.url);
  for (const name of (await readdir(pluginsDir)).sort()) {
    for (const ext of ['js', 'ts']) {
      const url = new URL(`${name}/cli/commands.${ext}`, pluginsDir);
      if (existsSync(url)) {
        urls.push(url);
        break;
      }
    }
  }
  const all: CliCommand[] = [];
  for (const url of urls) {
    const mod = (await import(url.href)) as { commands?: CliCommand[] };
    all.push(...(mod.commands ?? []));
  }
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
  const commands = await loadCommands();
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
      options: { help: { type: 'boolean', short: 'h' }, url: { type: 'string' }, ...command.options },
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
      client: io.client ?? (() => clientFromEnv(env, dataDirFromEnv(env), values['url'] as string | undefined)),
    };
    return await command.run({ values, positionals }, fullIO);
  } catch (e) {
    if (e instanceof CliError) {
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
