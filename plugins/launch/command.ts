/**
 * `lia launch <client> [--model M] [--ctx N] [--print] [--host H | --url U] [-- ARGS...]`:
 * prepares the appliance for a coding agent (see `prepare.ts`), then runs the agent with the
 * settings of `clients.ts` in its environment and arguments, its terminal inherited, and exits
 * with its exit code. `--print` shows the settings as shell lines instead of running it.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, readFile } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import { CliError, type CliArgs, type CliCommand, type CliIO } from 'lia/plugin';
import { CLIENTS, findClient, type AgentClient } from './clients.js';
import { AGENT_CONTEXT, ensureContext, keyName, launchKey, pickModel } from './prepare.js';

const NAMES = CLIENTS.map((c) => c.name).join(', ');

/** The client's executable on `PATH`, or null. */
async function onPath(bin: string, env: NodeJS.ProcessEnv): Promise<string | null> {
  for (const dir of (env['PATH'] ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, bin);
    if (
      await access(file, fsConstants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return file;
  }
  return null;
}

/** `--host H[:PORT]` as a URL (port 8443 unless given), else `--url`, else the client's default. */
function targetUrl(args: CliArgs): string | undefined {
  const host = args.values['host'];
  if (typeof host !== 'string') return args.values['url'] as string | undefined;
  if (args.values['url'] !== undefined) throw new CliError('give --host or --url, not both', 2);
  const bracketed = host.includes(':') && !host.startsWith('[') && host.split(':').length > 2 ? `[${host}]` : host;
  return `https://${/:\d+$/.test(bracketed) ? bracketed : `${bracketed}:8443`}`;
}

function positiveInt(v: CliArgs['values'][string], flag: string, fallback: number): number {
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--${flag} must be a whole number ≥ 1`, 2);
  return n;
}

const quote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/** Runs the client with the terminal inherited; resolves with its exit code (128 + signal when killed). */
function run(file: string, argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { stdio: 'inherit', env });
    // Ctrl-C reaches the client (same process group); lia waits for it to finish.
    const ignore = (): void => undefined;
    process.on('SIGINT', ignore);
    child.once('error', (err) => {
      process.off('SIGINT', ignore);
      reject(new CliError(`cannot run ${file}: ${err.message}`));
    });
    child.once('exit', (code, signal) => {
      process.off('SIGINT', ignore);
      resolve(code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0));
    });
  });
}

async function launch(args: CliArgs, io: CliIO, usage: string): Promise<number> {
  const [name, ...extra] = args.positionals;
  if (!name) throw new CliError(`usage: ${usage}\nclients: ${NAMES}`, 2);
  const agent: AgentClient | undefined = findClient(name);
  if (!agent) throw new CliError(`unknown client "${name}"; one of: ${NAMES}`, 2);
  const print = args.values['print'] === true;
  const bin = print ? agent.bin : await onPath(agent.bin, io.env);
  if (!bin) throw new CliError(`${agent.title} is not installed ("${agent.bin}" is not on PATH); install it with: ${agent.install}`, 127);
  const want = positiveInt(args.values['ctx'], 'ctx', AGENT_CONTEXT);

  const client = await io.client(targetUrl(args));
  const caFile = path.resolve(io.env['LIA_CA_CERT'] ?? path.join(io.dataDir, 'pki', 'root.crt'));
  const ca = await readFile(caFile, 'utf8');
  const model = await pickModel(client, args.values['model'] as string | undefined);
  const { contextLength, changed } = await ensureContext(client, model, want);
  if (changed) io.stderr.write(`Set num_ctx ${contextLength} on "${model}" (agents send prompts of 15,000-30,000 tokens).\n`);
  const { key, how } = await launchKey(client, io.env, ca, agent.name);
  const { env, args: pre } = agent.settings({ url: client.url, key, caFile, model, contextLength });
  const argv = [...pre, ...extra];

  if (print) {
    io.stdout.write(`# ${agent.title} (${agent.surface}) on ${client.url}, model ${model}, context ${contextLength}, key "${keyName(agent.name)}" (${how})\n`);
    for (const [k, v] of Object.entries(env)) io.stdout.write(v === null ? `unset ${k}\n` : `export ${k}=${quote(v)}\n`);
    io.stdout.write(`${[agent.bin, ...argv].map(quote).join(' ')}\n`);
    return 0;
  }
  io.stderr.write(`Starting ${agent.title} on ${client.url} with "${model}" (context ${contextLength}, key "${keyName(agent.name)}", ${how}).\n`);
  const childEnv: NodeJS.ProcessEnv = { ...io.env };
  for (const [k, v] of Object.entries(env)) {
    if (v === null) delete childEnv[k];
    else childEnv[k] = v;
  }
  return run(bin, argv, childEnv);
}

export const launchCommand: CliCommand = {
  name: 'launch',
  summary: 'Run a coding agent (claude, codex, opencode, qwen) against the appliance, or --print its settings',
  usage: 'lia launch claude|codex|opencode|qwen [--model NAME] [--ctx TOKENS] [--print] [--host HOST | --url URL] [-- CLIENT-ARGS...]',
  options: {
    model: { type: 'string', short: 'm' },
    ctx: { type: 'string' },
    print: { type: 'boolean' },
    host: { type: 'string' },
  },
  run(args, io) {
    return launch(args, io, this.usage);
  },
};
