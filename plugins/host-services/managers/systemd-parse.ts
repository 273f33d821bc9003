/**
 * Pure parsers for systemd's command-line output (systemd 252): `systemctl show` property blocks
 * and `journalctl -o json` lines. Written against recorded real outputs (test/fixtures/host).
 *
 * @module
 */
import type { LogLine, ServiceActiveState } from 'lia/plugin/contracts';
import type { ServiceStatus } from '../public.js';

/** Splits `systemctl show` output into one property map per unit (blocks are separated by blank lines). */
export function parseShowBlocks(stdout: string): Map<string, string>[] {
  const blocks: Map<string, string>[] = [];
  let current = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') {
      if (current.size > 0) blocks.push(current);
      current = new Map();
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) continue;
    current.set(line.slice(0, eq), line.slice(eq + 1));
  }
  if (current.size > 0) blocks.push(current);
  return blocks;
}

/** systemd's ActiveState mapped onto the five states the API reports; the raw value stays in sub_state context. */
export function activeStateOf(raw: string | undefined): ServiceActiveState {
  switch (raw) {
    case 'active':
    case 'reloading':
    case 'refreshing':
      return 'active';
    case 'activating':
      return 'activating';
    case 'deactivating':
    case 'maintenance':
      return 'deactivating';
    case 'failed':
      return 'failed';
    default:
      return 'inactive';
  }
}

/** A `systemctl show` timestamp (`@1700000000` with `--timestamp=unix`, or the pretty UTC form) as ISO-8601. */
export function parseTimestamp(raw: string | undefined): string | null {
  if (!raw || raw === 'n/a' || raw === '0') return null;
  const unix = /^@(\d+)$/.exec(raw);
  if (unix?.[1]) return new Date(Number(unix[1]) * 1000).toISOString();
  const pretty = /^(?:\w{3} )?(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}) UTC$/.exec(raw);
  if (pretty) return new Date(`${pretty[1]}T${pretty[2]}Z`).toISOString();
  const parsed = Date.parse(raw);
  return Number.isNaN(parsed) ? null : new Date(parsed).toISOString();
}

const ENABLED_STATES = new Set(['enabled', 'enabled-runtime', 'static', 'indirect', 'generated', 'alias', 'linked', 'linked-runtime']);

/** One unit's block as a service status; `name` is the API name (`svc-inference`). */
export function serviceStatusOf(name: string, props: Map<string, string>): ServiceStatus {
  const load = props.get('LoadState');
  const pid = Number(props.get('MainPID') ?? '0');
  const active = props.get('ActiveState');
  return {
    name,
    description: props.get('Description') ?? name,
    state: activeStateOf(active),
    sub_state: load === 'not-found' ? 'not-found' : (props.get('SubState') ?? 'unknown'),
    since: parseTimestamp(props.get('StateChangeTimestamp') ?? props.get('ActiveEnterTimestamp')),
    main_pid: Number.isInteger(pid) && pid > 0 ? pid : null,
    enabled: ENABLED_STATES.has(props.get('UnitFileState') ?? ''),
  };
}

/** journald's MESSAGE: a string, null (over 4096 bytes without --all), or bytes (not UTF-8). */
function messageOf(raw: unknown): string {
  if (typeof raw === 'string') return raw;
  if (raw === null || raw === undefined) return '[message too large to show]';
  if (Array.isArray(raw)) {
    if (raw.every((b) => typeof b === 'number')) return Buffer.from(raw).toString('utf8');
    return raw.map((v) => messageOf(v)).join('\n');
  }
  return typeof raw === 'string' ? raw : JSON.stringify(raw);
}

/** Parses `journalctl -o json` (one object per line); lines that are not journal objects are skipped. */
export function parseJournalJson(stdout: string): LogLine[] {
  const lines: LogLine[] = [];
  for (const raw of stdout.split('\n')) {
    if (!raw.startsWith('{')) continue;
    let entry: Record<string, unknown>;
    try {
      entry = JSON.parse(raw) as Record<string, unknown>;
    } catch {
      continue;
    }
    const micros = entry['__REALTIME_TIMESTAMP'];
    if (typeof micros !== 'string' || !/^\d+$/.test(micros)) continue;
    const priority = Number(entry['PRIORITY'] ?? 6);
    lines.push({
      timestamp: new Date(Number(BigInt(micros) / 1000n)).toISOString(),
      priority: Number.isInteger(priority) && priority >= 0 && priority <= 7 ? priority : 6,
      message: messageOf(entry['MESSAGE']),
    });
  }
  return lines;
}
