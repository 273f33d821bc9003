/**
 * Management commands, all through the running appliance's `/system/` API (as Ollama's CLI goes
 * through its server): `lia status`, `lia gpu`, `lia services`, `lia service start|stop|restart
 * NAME [--force]`, `lia logs SERVICE [-n N]`, `lia network` and `lia hostname NEW`. Each takes
 * `--json` to print the API's answer as it is.
 *
 * @module
 */
import { table } from 'lia/utils';
import { CliError, type ApiClient, type CliCommand, type CliIO } from 'lia/plugin';
import type { SystemStatus } from '../public.js';

const JSON_OPTION = { json: { type: 'boolean' } } as const;

async function show<T>(io: CliIO, json: unknown, path: string, render: (body: T) => string, method = 'GET', body?: unknown): Promise<number> {
  const client: ApiClient = await io.client();
  const answer = await client.json<T>(method, path, body);
  io.stdout.write(json ? `${JSON.stringify(answer, null, 2)}\n` : render(answer));
  return 0;
}

interface Gpu {
  vendor: string;
  devices: { index?: number; name: string; vram_total_mb: number; vram_used_mb: number; temp_c: number | null }[];
  stale: boolean;
  error: string | null;
}

interface ServiceEntry {
  name: string;
  state: string;
  sub_state: string;
  since: string | null;
  main_pid: number | null;
  enabled: boolean;
}

function duration(seconds: number): string {
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  return d > 0 ? `${d}d ${h}h ${m}m` : h > 0 ? `${h}h ${m}m` : `${m}m ${seconds % 60}s`;
}

const PRIORITY = ['emerg', 'alert', 'crit', 'err', 'warning', 'notice', 'info', 'debug'];
const SERVICE_ACTIONS = ['start', 'stop', 'restart'] as const;

/** The management commands. */
export const commands: CliCommand[] = [
  {
    name: 'status',
    summary: 'Show host name, CPU, memory, model disk, uptime and version',
    usage: 'lia status [--json] [--url https://HOST:8443]',
    options: JSON_OPTION,
    run: (args, io) =>
      show<SystemStatus>(io, args.values['json'], '/system/status', (s) =>
        table(
          [
            ['Host name', s.hostname],
            ['Version', s.version],
            ['Uptime', duration(s.uptime_seconds)],
            ['CPU', `${s.cpu_percent}%`],
            ['Memory', `${s.memory.used_percent}% of ${s.memory.total_gb} GB`],
            ['Model disk', `${s.disk.models.used} used, ${s.disk.models.free} free of ${s.disk.models.total}`],
            ['Disk total', s.disk.total],
          ],
          2,
        ),
      ),
  },
  {
    name: 'gpu',
    summary: 'Show the GPUs, their memory and temperature',
    usage: 'lia gpu [--json]',
    options: JSON_OPTION,
    run: (args, io) =>
      show<Gpu>(io, args.values['json'], '/system/gpu', (g) => {
        if (g.devices.length === 0) return `No GPU${g.vendor === 'none' ? '' : ` (${g.vendor})`}${g.error ? `: ${g.error}` : ''}\n`;
        const rows = [['#', 'NAME', 'VRAM USED', 'VRAM TOTAL', 'TEMP']];
        for (const [i, d] of g.devices.entries()) {
          rows.push([String(d.index ?? i), d.name, `${d.vram_used_mb} MB`, `${d.vram_total_mb} MB`, d.temp_c === null ? '-' : `${d.temp_c} °C`]);
        }
        const notes = [g.stale ? 'stale: the GPU monitor is stopped' : '', g.error ? `last probe failed: ${g.error}` : ''].filter(Boolean);
        return table(rows, 2) + notes.map((n) => `${n}\n`).join('');
      }),
  },
  {
    name: 'services',
    summary: 'List the six services and their state',
    usage: 'lia services [--json]',
    options: JSON_OPTION,
    run: (args, io) =>
      show<{ manager: string; services: ServiceEntry[] }>(io, args.values['json'], '/system/services', (b) =>
        table(
          [
            ['SERVICE', 'STATE', 'SUB', 'PID', 'ENABLED', 'SINCE'],
            ...b.services.map((s) => [s.name, s.state, s.sub_state, s.main_pid === null ? '-' : String(s.main_pid), s.enabled ? 'yes' : 'no', s.since ?? '-']),
          ],
          2,
        ),
      ),
  },
  ...SERVICE_ACTIONS.map((action): CliCommand => ({
    name: `service ${action}`,
    summary: `${action[0]!.toUpperCase()}${action.slice(1)} one service${action === 'stop' ? ' (--force for svc-system-api, svc-proxy)' : ''}`,
    usage: `lia service ${action} NAME${action === 'stop' ? ' [--force]' : ''} [--json]`,
    options: { ...JSON_OPTION, force: { type: 'boolean' } },
    async run(args, io) {
      const name = args.positionals[0];
      if (!name) throw new CliError(`which service? usage: lia service ${action} NAME`, 2);
      const body = { action, ...(args.values['force'] ? { force: true } : {}) };
      return show<{ status: string; state?: ServiceEntry }>(
        io,
        args.values['json'],
        `/system/services/${encodeURIComponent(name)}/`,
        (r) => (r.status === 'done' ? `${name}: ${r.state?.state ?? 'done'}\n` : `${name}: ${action} ${r.status}\n`),
        'POST',
        body,
      );
    },
  })),
  {
    name: 'logs',
    summary: 'Print the recent log lines of one service',
    usage: 'lia logs SERVICE [-n LINES] [--json]',
    options: { ...JSON_OPTION, lines: { type: 'string', short: 'n' } },
    async run(args, io) {
      const service = args.positionals[0];
      if (!service) throw new CliError('which service? usage: lia logs SERVICE [-n LINES]', 2);
      const q = new URLSearchParams({ service });
      if (typeof args.values['lines'] === 'string') q.set('lines', args.values['lines']);
      return show<{ lines: { timestamp: string; priority: number; message: string }[] }>(io, args.values['json'], `/system/logs?${q}`, (b) =>
        b.lines.map((l) => `${l.timestamp} ${(PRIORITY[l.priority] ?? String(l.priority)).padEnd(7)} ${l.message}\n`).join(''),
      );
    },
  },
  {
    name: 'network',
    summary: 'Show the host name, addresses and mDNS state',
    usage: 'lia network [--json]',
    options: JSON_OPTION,
    run: (args, io) =>
      show<{
        hostname: string;
        interfaces: { name: string; mac: string | null; addresses: { address: string; prefix: number }[] }[];
        mdns: { enabled: boolean; responder: string; hostname: string | null };
      }>(
        io,
        args.values['json'],
        '/system/network',
        (n) =>
          `Host name  ${n.hostname}\nmDNS       ${n.mdns.enabled ? `${n.mdns.hostname ?? '(probing)'} via ${n.mdns.responder}` : 'off'}\n` +
          table(
            [
              ['INTERFACE', 'MAC', 'ADDRESSES'],
              ...n.interfaces.map((i) => [i.name, i.mac ?? '-', i.addresses.map((a) => `${a.address}/${a.prefix}`).join(' ')]),
            ],
            2,
          ),
      ),
  },
  {
    name: 'hostname',
    summary: 'Change the host name (re-advertised over mDNS, certificate re-issued)',
    usage: 'lia hostname NEW [--json]',
    options: JSON_OPTION,
    async run(args, io) {
      const name = args.positionals[0];
      if (!name) throw new CliError('usage: lia hostname NEW', 2);
      return show<{ hostname: string; mdns: { hostname: string | null }; certificate: { covers_hostname: boolean } }>(
        io,
        args.values['json'],
        `/system/network/hostname?hostname=${encodeURIComponent(name)}`,
        (r) =>
          `Host name is now ${r.hostname} (${r.mdns.hostname ?? 'mDNS off'}); certificate ${r.certificate.covers_hostname ? 'covers it' : 'does NOT cover it yet'}\n`,
        'POST',
      );
    },
  },
];
