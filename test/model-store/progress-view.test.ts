import t from 'tap';
import { formatBytes } from '../../core/utils.js';
import { formatDuration, ProgressView } from '../../plugins/model-store/cli/progress-view.js';

function sink(isTTY: boolean): NodeJS.WritableStream & { isTTY: boolean; columns: number; text: string } {
  const s = {
    isTTY,
    columns: 120,
    text: '',
    write(c: string) {
      s.text += c;
      return true;
    },
  };
  return s as unknown as NodeJS.WritableStream & { isTTY: boolean; columns: number; text: string };
}

t.test('units', async (t) => {
  t.equal(formatBytes(999), '999 B');
  t.equal(formatBytes(1_185_376), '1.2 MB');
  t.equal(formatBytes(71_000_000), '71.0 MB');
  t.equal(formatBytes(4_661_211_424), '4.7 GB');
  t.equal(formatDuration(42), '42s');
  t.equal(formatDuration(192), '3m12s');
  t.equal(formatDuration(3840), '1h04m');
});

t.test('a terminal gets a redrawn bar with speed and time left', async (t) => {
  let now = 0;
  const out = sink(true);
  const view = new ProgressView(out, 'pulling', () => now);
  const digest = 'sha256:' + 'ab'.repeat(32);
  view.update({ status: 'pulling manifest' });
  view.update({ status: 'pulling layer', digest, total: 100_000_000, completed: 0 });
  now = 1000;
  view.update({ status: 'pulling layer', digest, total: 100_000_000, completed: 25_000_000 });
  const frame = out.text.split('\x1b[2K').at(-1)!;
  t.match(frame, /^pulling abababababab {2}25% ▕█{10} {30}▏ 25\.0 MB\/100 MB {2}25\.0 MB\/s {2}3s\n$/);
  t.match(out.text, /\x1b\[1F/, 'moves up to redraw in place');
  now = 1050;
  view.update({ status: 'pulling layer', digest, total: 100_000_000, completed: 26_000_000 });
  t.notMatch(out.text.split('\x1b[2K').at(-1), /26\.0 MB/, 'at most one frame every 100 ms');
  now = 4000;
  view.update({ status: 'pulling layer', digest, total: 100_000_000, completed: 100_000_000 });
  view.update({ status: 'success' });
  view.done();
  t.match(out.text, /100% ▕█{40}▏ 100 MB\/100 MB {2}25\.0 MB\/s\n\x1b\[2Ksuccess\n$/);
});

t.test('a pipe gets each status and each finished layer once', async (t) => {
  let now = 0;
  const out = sink(false);
  const view = new ProgressView(out, 'pulling', () => now);
  const digest = 'sha256:' + 'cd'.repeat(32);
  view.update({ status: 'pulling manifest' });
  for (const c of [0, 10, 50, 100]) {
    now += 500;
    view.update({ status: 'pulling layer', digest, total: 100, completed: c });
  }
  view.update({ status: 'pulling layer', digest, total: 100, completed: 100 });
  view.update({ status: 'success' });
  view.done();
  t.match(out.text, /^pulling manifest\npulling cdcdcdcdcdcd 100% ▕█+▏ 100 B\/100 B {2}67 B\/s\nsuccess\n$/);
});
