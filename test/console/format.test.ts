/**
 * The device console's pure formatting: the CA fingerprint in readable groups, the warnings it
 * picks from the logs and the CA download URL it puts in the QR code.
 */
import t from 'tap';
import { caDownloadUrl, clip, groupFingerprint, recentWarnings } from '../../plugins/console/format.js';

const FP = 'BB:8C:7A:3D:31:F2:74:AB:F4:9F:EA:71:B5:71:1B:19:9C:58:80:2E:16:A6:42:C1:8A:CF:18:63:40:51:64:8A';

t.test('a SHA-256 fingerprint becomes four lines of four groups of four hex digits', async (t) => {
  t.same(groupFingerprint(FP), ['BB8C  7A3D  31F2  74AB', 'F49F  EA71  B571  1B19', '9C58  802E  16A6  42C1', '8ACF  1863  4051  648A']);
  t.same(groupFingerprint(FP.replace(/:/g, '').toLowerCase()), groupFingerprint(FP), 'bare lower-case hex reads the same');
  t.same(groupFingerprint('ab:cd:ef', 2, 2), ['AB  CD', 'EF'], 'a short last group and line are kept');
  t.same(groupFingerprint(''), []);
});

t.test('recent warnings: priority warning or worse, newest first, first line only, bounded', async (t) => {
  const logs = {
    'svc-proxy': [
      { timestamp: '2026-11-25T10:00:01.000Z', priority: 6, message: 'listening' },
      { timestamp: '2026-11-25T10:00:03.000Z', priority: 4, message: 'slow client\nstack' },
    ],
    'svc-inference': [{ timestamp: '2026-11-25T10:00:02.000Z', priority: 3, message: 'runner crashed' }],
  };
  t.same(recentWarnings(logs, 5), [
    { timestamp: '2026-11-25T10:00:03.000Z', service: 'svc-proxy', message: 'slow client' },
    { timestamp: '2026-11-25T10:00:02.000Z', service: 'svc-inference', message: 'runner crashed' },
  ]);
  t.equal(recentWarnings(logs, 1).length, 1);
});

t.test('the QR code offers the CA on an address a phone can reach', async (t) => {
  t.equal(caDownloadUrl(['https://localhost:8443', 'https://box.local:8443']), 'https://box.local:8443/system/ca-cert');
  t.equal(caDownloadUrl(['https://localhost:8443']), 'https://localhost:8443/system/ca-cert', 'localhost when nothing else is covered');
  t.equal(caDownloadUrl([]), null);
  t.equal(clip('abcdef', 4), 'abc…');
});
