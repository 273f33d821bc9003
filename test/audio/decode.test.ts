/**
 * `decodeWindows` (plugins/engine/audio.ts) against a stand-in for ffmpeg, a small script that
 * writes seconds of samples at the asked rate and then waits for the test's word before it ends
 * (well or with ffmpeg's kind of error): the first windows are handed out while the decoder still
 * runs, the last once it has ended; a failure after some windows is a 400 naming `file` with the
 * message cleaned of the temporary path; leaving the loop early, an abort or too long an audio
 * kill the decoder; the temporary copy of the upload is gone afterwards. No socket, no model.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { decodeWindows, type DecodeLimits, type DecodedWindow } from '../../plugins/engine/audio.js';

const RATE = 16000;
const WINDOW = 10 * RATE;

const dir = mkdtempSync(path.join(os.tmpdir(), 'lia-decode-test-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
// .mjs: Node reads a file without an extension as CommonJS.
const standIn = path.join(dir, 'ffmpeg.mjs');
writeFileSync(
  standIn,
  `#!/usr/bin/env node
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
const args = process.argv.slice(2);
const rate = Number(args[args.indexOf('-ar') + 1]);
const input = args[args.indexOf('-i') + 1];
const state = process.env.STANDIN_DIR;
writeFileSync(state + '/input', input);
writeFileSync(state + '/pid', String(process.pid));
writeFileSync(state + '/upload', readFileSync(input));
const samples = new Float32Array(Math.round(Number(process.env.STANDIN_SECONDS) * rate));
// One second of tone, one of silence, and so on.
for (let i = 0; i < samples.length; i++) samples[i] = Math.floor(i / rate) % 2 === 0 ? 0.3 * Math.sin((2 * Math.PI * 400 * i) / rate) : 0;
process.stdout.write(Buffer.from(samples.buffer), () => {
  const wait = () => {
    if (!existsSync(state + '/go')) return setTimeout(wait, 5);
    if (process.env.STANDIN_FAIL) {
      process.stderr.write('[flac @ 0x55d0c0a1b2c0] invalid residual in ' + input + '\\n');
      process.exit(1);
    }
    process.exit(0);
  };
  wait();
});
`,
  { mode: 0o755 },
);

const limits: DecodeLimits = { maxSeconds: 3600, timeoutMs: 60_000, ffmpeg: standIn };
const upload = new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]);

/** A fresh state folder for the stand-in, the environment set for it; returns the folder. */
function scenario(t: Test, seconds: number, fail = false): string {
  const state = mkdtempSync(path.join(dir, 'state-'));
  const saved = { ...process.env };
  process.env['STANDIN_DIR'] = state;
  process.env['STANDIN_SECONDS'] = String(seconds);
  if (fail) process.env['STANDIN_FAIL'] = '1';
  else delete process.env['STANDIN_FAIL'];
  t.teardown(() => {
    process.env = saved;
  });
  return state;
}

const go = (state: string) => writeFileSync(path.join(state, 'go'), '');
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

t.test('windows are handed out while the decoder runs, the last once it has ended well', async (t) => {
  const state = scenario(t, 25);
  const audio = decodeWindows(upload, RATE, WINDOW, limits);
  const windows: DecodedWindow[] = [];
  const decodedAt: boolean[] = [];
  for await (const w of audio) {
    windows.push(w);
    decodedAt.push(audio.decoded);
    // The stand-in waits for the word: two windows were cut from its output before it ended.
    if (windows.length === 2) go(state);
  }
  t.same(decodedAt, [false, false, true], 'two windows before the end, the rest after');
  t.equal(audio.samples, 25 * RATE);
  t.same(
    windows.map((w) => w.start + w.length),
    [windows[1]!.start, windows[2]!.start, 25 * RATE],
    'the windows follow each other to the end',
  );
  // Cut at pauses: the middle of the silent second 9-10 s and 17-18 s (within a frame).
  t.ok(Math.abs(windows[0]!.length / RATE - 9.5) <= 0.02, `first cut at ${windows[0]!.length / RATE} s`);
  t.same([...readFileSync(path.join(state, 'upload'))], [...upload], 'the decoder read the upload');
  t.notOk(existsSync(readFileSync(path.join(state, 'input'), 'utf8')), 'the temporary copy is gone');
});

t.test('a decoder that fails after some windows: a 400 naming file, without the path', async (t) => {
  const state = scenario(t, 25, true);
  const audio = decodeWindows(upload, RATE, WINDOW, limits);
  let seen = 0;
  const err = await (async () => {
    for await (const _ of audio) {
      t.notOk(audio.decoded, 'not decoded while windows come');
      if (++seen === 2) go(state);
    }
  })().catch((e: unknown) => e);
  t.equal(seen, 2, 'the windows cut before the failure were handed out');
  t.match(err, { statusCode: 400, param: 'file', message: /truncated or not in a format LIA decodes \(\[flac\] invalid residual in file\)/ });
  t.notOk(audio.decoded);
  t.notOk(existsSync(readFileSync(path.join(state, 'input'), 'utf8')), 'the temporary copy is gone');
});

t.test('leaving the loop early kills the decoder and removes the copy', async (t) => {
  const state = scenario(t, 25);
  for await (const _ of decodeWindows(upload, RATE, WINDOW, limits)) break;
  const pid = Number(readFileSync(path.join(state, 'pid'), 'utf8'));
  t.notOk(alive(pid), 'the stand-in, which waits for a word that never comes, is gone');
  t.notOk(existsSync(readFileSync(path.join(state, 'input'), 'utf8')));
});

t.test('an abort stops the decoder with its reason', async (t) => {
  const state = scenario(t, 25);
  const controller = new AbortController();
  const err = await (async () => {
    for await (const _ of decodeWindows(upload, RATE, WINDOW, limits, controller.signal)) controller.abort(new Error('client gone'));
  })().catch((e: unknown) => e);
  t.match(err, { message: 'client gone' });
  t.notOk(alive(Number(readFileSync(path.join(state, 'pid'), 'utf8'))));
});

t.test('audio longer than maxSeconds: a 400 before the first window', async (t) => {
  const state = scenario(t, 25);
  let seen = 0;
  const err = await (async () => {
    for await (const _ of decodeWindows(upload, RATE, WINDOW, { ...limits, maxSeconds: 5 })) seen++;
  })().catch((e: unknown) => e);
  t.equal(seen, 0);
  t.match(err, { statusCode: 400, param: 'file', message: /longer than 5 s/ });
  t.notOk(alive(Number(readFileSync(path.join(state, 'pid'), 'utf8'))));
});

t.test('an empty file is a 400 before any decoder runs; a missing ffmpeg a 503 naming the package', async (t) => {
  const state = scenario(t, 1);
  const drain = async (file: Uint8Array, l: DecodeLimits) => {
    for await (const _ of decodeWindows(file, RATE, WINDOW, l));
  };
  t.match(await drain(new Uint8Array(0), limits).catch((e: unknown) => e), { statusCode: 400, param: 'file', message: /empty/ });
  t.notOk(existsSync(path.join(state, 'pid')), 'no decoder was started');
  t.match(await drain(upload, { ...limits, ffmpeg: path.join(dir, 'no-such-ffmpeg') }).catch((e: unknown) => e), {
    statusCode: 503,
    message: /apt-get install ffmpeg/,
  });
});
