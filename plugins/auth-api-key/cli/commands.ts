/**
 * `lia key show` prints the master key from the local key file; the other `lia key` commands ask
 * the running appliance through `/system/api-keys` (trusting its CA): `rotate` replaces the master
 * key or, given a name, a named key; `create`, `list` and `revoke` manage named keys. A secret is
 * printed once, on stdout alone, so `KEY=$(lia key create ci-bot --scope inference)` works.
 *
 * @module
 */
import { table } from 'lia/utils';
import { readFile } from 'node:fs/promises';
import { CliError, type CliArgs, type CliCommand } from 'lia/plugin';

interface KeyView {
  name: string;
  scopes: string[];
  models: string[] | null;
  expires_at: string | null;
  limits: Record<string, number> | null;
  created_at: string;
  last_used_at: string | null;
  hint: string;
  usage: { requests: number; prompt_tokens: number; completion_tokens: number };
}

const list = (v: CliArgs['values'][string]): string[] =>
  (Array.isArray(v) ? v : v === undefined ? [] : [v])
    .flatMap((s) => String(s).split(','))
    .map((s) => s.trim())
    .filter(Boolean);

function positiveInt(v: CliArgs['values'][string], flag: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new CliError(`--${flag} must be a whole number ≥ 1`);
  return n;
}

/** `--expires` as an ISO date, or a duration from now: `30m`, `12h`, `7d`. */
function expiry(v: CliArgs['values'][string]): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d+)([mhd])$/.exec(v);
  if (m) return new Date(Date.now() + Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'm' | 'h' | 'd']).toISOString();
  return v;
}

function nameArg(args: CliArgs, usage: string): string {
  const name = args.positionals[0];
  if (!name) throw new CliError(`usage: ${usage}`, 2);
  return encodeURIComponent(name);
}

export const commands: CliCommand[] = [
  {
    name: 'key show',
    summary: 'Print the master API key (reads the key file; run it on the appliance)',
    usage: 'lia key show',
    async run(_args, io) {
      const file = `${io.dataDir}/keys/master.key`;
      const key = await readFile(file, 'utf8').catch(() => {
        throw new CliError(`cannot read ${file}: start the appliance once, or run as the user that owns it`);
      });
      io.stdout.write(`${key.trim()}\n`);
      return 0;
    },
  },
  {
    name: 'key rotate',
    summary: 'Replace the master API key, or a named key, now (the old secret stops working at once)',
    usage: 'lia key rotate [NAME] [--url https://HOST:8443]',
    async run(args, io) {
      const client = await io.client();
      const name = args.positionals[0];
      const path = name ? `/system/api-keys/${encodeURIComponent(name)}/rotate` : '/system/api-keys/rotate';
      const body = await client.json<{ key: string }>('POST', path);
      io.stdout.write(`${body.key}\n`);
      io.stderr.write(`The previous ${name ? `secret of "${name}"` : 'master key'} no longer works; update your clients.\n`);
      return 0;
    },
  },
  {
    name: 'key create',
    summary: 'Create a named API key with scopes, and print its secret (shown once)',
    usage: 'lia key create NAME --scope SCOPE [--scope SCOPE...] [--model PATTERN...] [--expires 30d|ISO-DATE] [--rpm N] [--tpm N] [--streams N]',
    options: {
      scope: { type: 'string', multiple: true },
      model: { type: 'string', multiple: true },
      expires: { type: 'string' },
      rpm: { type: 'string' },
      tpm: { type: 'string' },
      streams: { type: 'string' },
    },
    async run(args, io) {
      const name = args.positionals[0];
      if (!name) throw new CliError(`usage: ${this.usage}`, 2);
      const scopes = list(args.values['scope']);
      if (scopes.length === 0) throw new CliError('name at least one --scope (inference, models:read, models:write, system:read, system:admin, keys:admin)', 2);
      const models = list(args.values['model']);
      const limits = {
        requests_per_minute: positiveInt(args.values['rpm'], 'rpm'),
        tokens_per_minute: positiveInt(args.values['tpm'], 'tpm'),
        concurrent_streams: positiveInt(args.values['streams'], 'streams'),
      };
      const client = await io.client();
      const body = await client.json<KeyView & { key: string }>('POST', '/system/api-keys', {
        name,
        scopes,
        ...(models.length ? { models } : {}),
        ...(expiry(args.values['expires']) ? { expires_at: expiry(args.values['expires']) } : {}),
        ...(Object.values(limits).some((v) => v !== undefined) ? { limits } : {}),
      });
      io.stdout.write(`${body.key}\n`);
      io.stderr.write(`Key "${body.name}" created with ${body.scopes.join(', ')}; the secret is shown only now.\n`);
      return 0;
    },
  },
  {
    name: 'key list',
    summary: 'List the API keys: scopes, models, expiry, last use and usage (never a secret)',
    usage: 'lia key list [--json]',
    options: { json: { type: 'boolean' } },
    async run(args, io) {
      const client = await io.client();
      const { keys } = await client.json<{ keys: KeyView[] }>('GET', '/system/api-keys');
      if (args.values['json']) {
        io.stdout.write(`${JSON.stringify(keys, null, 2)}\n`);
        return 0;
      }
      const rows = [['NAME', 'HINT', 'SCOPES', 'MODELS', 'EXPIRES', 'LAST USED', 'REQUESTS', 'TOKENS']];
      for (const k of keys) {
        rows.push([
          k.name,
          k.hint,
          k.scopes.join(','),
          k.models?.join(',') ?? 'all',
          k.expires_at ?? 'never',
          k.last_used_at ?? 'never',
          String(k.usage.requests),
          String(k.usage.prompt_tokens + k.usage.completion_tokens),
        ]);
      }
      io.stdout.write(table(rows, 2));
      return 0;
    },
  },
  {
    name: 'key revoke',
    summary: 'Revoke a named API key (refused from the next request on)',
    usage: 'lia key revoke NAME',
    async run(args, io) {
      const name = nameArg(args, this.usage);
      const client = await io.client();
      await client.json('DELETE', `/system/api-keys/${name}`);
      io.stderr.write(`Key "${decodeURIComponent(name)}" revoked.\n`);
      return 0;
    },
  },
];
