/**
 * The device console redraws only when what it shows changes: {@link screenKey} is equal for two
 * snapshots that draw the same screen (a refresh seconds later on an idle box) and differs as soon
 * as anything shown moves.
 */
import t from 'tap';
import { formatUptime } from '../../plugins/console/format.js';
import type { Snapshot } from '../../plugins/console/snapshot.js';
import { screenKey } from '../../plugins/console/view.js';

const idle: Snapshot = {
  at: 1_000,
  status: {
    hostname: 'box',
    cpu_percent: 1.2,
    memory: { total_gb: 23.4, used_percent: 12.3 },
    disk: { models: { total: '100 GB', used: '1 GB', free: '99 GB' }, total: '100 GB' },
    uptime_seconds: 125,
    version: '0.1.0',
  },
  network: { hostname: 'box', urls: ['https://localhost:8443', 'https://box.local:8443'], mdns: { hostname: 'box.local', state: 'announced' } },
  services: [{ name: 'svc-inference', state: 'active', sub_state: 'running' }],
  models: [],
  gpu: { vendor: 'none', devices: [], error: null },
  warnings: [],
  logsRead: true,
  errors: {},
};

t.test('uptime reads to the minute, as uptime(1) does', async (t) => {
  t.equal(formatUptime(59), '0m');
  t.equal(formatUptime(125), '2m');
  t.equal(formatUptime(2 * 3600 + 5 * 60 + 7), '2h 5m');
  t.equal(formatUptime(3 * 86400 + 4 * 3600 + 1), '3d 4h');
});

t.test('a refresh of an idle box draws the same screen', async (t) => {
  const later: Snapshot = {
    ...idle,
    at: 6_000,
    logsRead: false,
    status: { ...idle.status!, uptime_seconds: 130, cpu_percent: 0.8, memory: { ...idle.status!.memory, used_percent: 12.4 } },
  };
  t.equal(screenKey(later), screenKey(idle), 'seconds of uptime, tenths of a percent and the round time are not shown');
});

t.test('anything shown changes the screen', async (t) => {
  const changed: Array<[string, Snapshot]> = [
    ['a service stops', { ...idle, services: [{ name: 'svc-inference', state: 'inactive', sub_state: 'dead' }] }],
    ['a model loads', { ...idle, models: [{ name: 'llama3.2:1b', size: 1_000_000, size_vram: 0 }] }],
    ['a warning arrives', { ...idle, warnings: [{ timestamp: '2026-11-26T10:00:00.000Z', service: 'svc-proxy', message: 'slow client' }] }],
    ['the host is renamed', { ...idle, network: { ...idle.network!, hostname: 'box-2' } }],
    ['CPU load moves by a point', { ...idle, status: { ...idle.status!, cpu_percent: 2.6 } }],
    ['a minute passes', { ...idle, status: { ...idle.status!, uptime_seconds: 185 } }],
    ['a part becomes unreachable', { ...idle, gpu: null, errors: { gpu: '503 stopped' } }],
  ];
  for (const [what, snap] of changed) t.not(screenKey(snap), screenKey(idle), what);
});
