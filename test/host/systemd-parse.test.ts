/**
 * Parsers of systemd 252 output: `systemctl show` property blocks (state mapping, timestamps,
 * main PID, enablement, a unit that is not installed) and `journalctl -o json` recorded from a
 * real journald (multi-line, non-UTF-8 byte arrays, over-long null messages, priorities).
 */
import { readFile } from 'node:fs/promises';
import t from 'tap';
import { activeStateOf, parseJournalJson, parseShowBlocks, parseTimestamp, serviceStatusOf } from '../../plugins/host-services/managers/systemd-parse.js';
import { hostFixture } from './fake-tool.js';

t.test('systemctl show: one block per unit, split on the first "="', async (t) => {
  const blocks = parseShowBlocks(await readFile(hostFixture('systemd/systemctl-show-six.txt'), 'utf8'));
  t.equal(blocks.length, 6);
  t.equal(blocks[0]?.get('Id'), 'svc-inference.service');
  t.equal(parseShowBlocks('Environment=A=1 B=2\n').at(0)?.get('Environment'), 'A=1 B=2');
});

t.test('systemctl show: service statuses in the API vocabulary', async (t) => {
  const blocks = parseShowBlocks(await readFile(hostFixture('systemd/systemctl-show-six.txt'), 'utf8'));
  t.same(serviceStatusOf('svc-inference', blocks[0]!), {
    name: 'svc-inference',
    description: 'LIA inference engine (model runners, /api and /v1 generation)',
    state: 'active',
    sub_state: 'running',
    since: new Date(1795339401 * 1000).toISOString(),
    main_pid: 48213,
    enabled: true,
  });
  t.match(serviceStatusOf('svc-webui', blocks[1]!), { state: 'inactive', sub_state: 'dead', main_pid: null, enabled: false });
  t.match(serviceStatusOf('svc-gpu-monitor', blocks[3]!), { state: 'failed', sub_state: 'failed' });
  t.match(serviceStatusOf('svc-system-api', blocks[4]!), { state: 'activating', sub_state: 'auto-restart' });
  t.match(serviceStatusOf('svc-certs', blocks[5]!), { state: 'inactive', sub_state: 'not-found', since: null, enabled: false });
});

t.test('ActiveState values beyond the five map onto them', async (t) => {
  t.equal(activeStateOf('reloading'), 'active');
  t.equal(activeStateOf('refreshing'), 'active');
  t.equal(activeStateOf('maintenance'), 'deactivating');
  t.equal(activeStateOf('something-new'), 'inactive');
  t.equal(activeStateOf(undefined), 'inactive');
});

t.test('timestamps: unix, pretty UTC, empty', async (t) => {
  t.equal(parseTimestamp('@1795339401'), '2026-11-22T09:23:21.000Z');
  t.equal(parseTimestamp('Sun 2026-11-22 09:23:21 UTC'), '2026-11-22T09:23:21.000Z');
  t.equal(parseTimestamp(''), null);
  t.equal(parseTimestamp('n/a'), null);
});

t.test('journalctl -o json: every recorded entry, decoded', async (t) => {
  const lines = parseJournalJson(await readFile(hostFixture('systemd/journalctl-json-svc-inference.txt'), 'utf8'));
  t.equal(lines.length, 11);
  for (const l of lines) {
    t.match(l.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    t.ok(Number.isInteger(l.priority) && l.priority >= 0 && l.priority <= 7);
  }
  const messages = lines.map((l) => l.message);
  t.ok(messages.includes('model stories:latest loaded in 812 ms (ctx 2048, 1 parallel)'));
  t.ok(messages.includes('prompt:\nline two of a multi-line message'), 'multi-line message kept whole');
  t.ok(messages.includes('token bytes \ufffd\ufffd not UTF-8'), 'a byte array is decoded, invalid bytes replaced');
  t.ok(messages.includes('[message too large to show]'), 'a null (over 4096 bytes) message says so');
  t.equal(lines.find((l) => l.message.startsWith('queue full'))?.priority, 4);
  t.equal(lines.find((l) => l.message.startsWith('runner crashed'))?.priority, 3);
  t.equal(lines[0]?.timestamp, new Date(Math.floor(1795339425528278 / 1000)).toISOString());
});

t.test('journalctl -o json: noise lines and empty output', async (t) => {
  t.same(parseJournalJson(''), []);
  t.same(parseJournalJson('-- No entries --\n{not json\n{"MESSAGE":"no timestamp"}\n'), []);
});
