/**
 * `lia engine build`'s progress display: on a terminal one bar redrawn in place, in a pipe or a log
 * a line per step and one per tenth of the compile; and the build's cache folder follows
 * LIA_CACHE_DIR, then XDG_CACHE_HOME, then ~/.cache.
 */
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { buildPaths, cacheRoot } from '../../plugins/backend-llama-server/build.js';
import { progressPrinter } from '../../plugins/backend-llama-server/cli.js';

function capture(tty: boolean): { out: PassThrough & { isTTY?: boolean; columns?: number }; text: () => string } {
  const out = Object.assign(new PassThrough(), { isTTY: tty, columns: 80 });
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  return { out, text: () => text };
}

t.test('in a pipe: each step once, the compile in tenths', async (t) => {
  const { out, text } = capture(false);
  const view = progressPrinter(out);
  view.report({ kind: 'step', text: 'configuring (CPU only, Release)' });
  for (let done = 1; done <= 200; done++) view.report({ kind: 'compile', done, total: 200 });
  view.report({ kind: 'step', text: 'built /x/llama-server' });
  view.end();
  const lines = text().trim().split('\n');
  t.equal(lines[0], 'configuring (CPU only, Release)');
  t.equal(lines.filter((l) => l.startsWith('compiling: ')).length, 11, 'one line per tenth, 0 to 100 %');
  t.match(lines.at(-2), /^compiling: 100% \(200\/200, /);
  t.equal(lines.at(-1), 'built /x/llama-server');
  t.notMatch(text(), /\r/, 'no carriage returns in a log');
});

t.test('on a terminal: a bar redrawn in place, ended by the next step', async (t) => {
  const { out, text } = capture(true);
  const view = progressPrinter(out);
  view.report({ kind: 'compile', done: 10, total: 40 });
  view.report({ kind: 'compile', done: 40, total: 40 });
  view.report({ kind: 'step', text: 'done' });
  t.match(text(), /\r\x1b\[2Kcompiling \[#+ *\] 10\/40 /);
  t.match(text(), /\r\x1b\[2Kcompiling \[#+\] 40\/40 \d+s\ndone\n$/);
});

t.test('the cache folder', async (t) => {
  t.equal(cacheRoot({ LIA_CACHE_DIR: '/srv/cache' }), '/srv/cache');
  t.equal(cacheRoot({ XDG_CACHE_HOME: '/xdg' }), '/xdg/lia');
  t.equal(cacheRoot({}), path.join(os.homedir(), '.cache', 'lia'));
  const p = buildPaths('0123456789abcdef0123456789abcdef01234567', { LIA_CACHE_DIR: '/c' });
  t.equal(p.binary, '/c/llama-server/0123456789ab/build/bin/llama-server', 'one folder per llama.cpp release');
});
