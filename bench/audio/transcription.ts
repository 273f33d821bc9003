/**
 * Transcription speed: the appliance (its own `lia serve` process, HTTPS, a key) answering the
 * `openai` SDK's `audio.transcriptions.create` against a bare transformers.js
 * `pipeline('automatic-speech-recognition', folder)` on the same model (bare-asr.ts, a process
 * of its own, so that neither side pays for the other's garbage collection or threads), in the
 * same run, the sides taking turns.
 *
 * Model: the `tiny-ctc` fixture (`npm run fixtures`; built here on first use otherwise), a
 * designed `Wav2Vec2ForCTC` graph that reads text written as tones (test/audio/signals.ts) back
 * exactly, with a 10 s window. Audio: `--files` texts of `--seconds` seconds each (upper-case
 * words from a fixed list, a fixed seed), written as tones at 16 kHz and encoded by ffmpeg as
 * `--container` (mp3 at 44.1 kHz by default), so both sides decode and resample. Every answer is
 * checked against the text it was made from: a side that returns anything else stops the run.
 *
 * The sides:
 * - `appliance`: the SDK uploads the encoded file as multipart; the appliance writes it to a
 *   private temporary file, decodes it with ffmpeg, cuts the samples into 10 s windows at pauses
 *   as they arrive and runs each window through the feature extractor and the network while the
 *   rest decodes, reads the characters and times every word. Its time includes the SDK's.
 * - `bare`: what a user of the library writes for the same file: ffmpeg decodes the file (on disk
 *   already) to mono float samples at 16 kHz on a pipe, then the pipeline transcribes them. The
 *   pipeline gets the whole file in one pass (transformers.js does not chunk wav2vec2 audio) and
 *   returns text only, no word times. Its session runs the options the appliance gives its own
 *   (`sessionOptions`: the same threads, no spinning, the memory arena). Timed from this process,
 *   a message to bare-asr.ts and its answer (well under a millisecond).
 * - `pipeline` (reference, no target): the same pipeline on samples decoded before the timing,
 *   i.e. the library and the model alone.
 *
 * Figures, per round:
 * - (a) real-time factor, audio seconds ÷ the median wall seconds of `--per-round`
 *   transcriptions of file 0 on each side, the sides taking turns request by request (order
 *   rotating). Target: appliance ÷ bare ≥ 0.95. Beside it, the CPU time per transcription of all
 *   the side's processes (the appliance with its ffmpeg and the SDK client; bare-asr.ts with its
 *   ffmpeg), which a busy machine disturbs less than wall time.
 * - (b) the `--files` files (4 by default) transcribed by the appliance as concurrent requests,
 *   against the bare side transcribing them one after another; the order of the sides alternates
 *   between rounds. Target: bare total ÷ appliance total ≥ 1.0.
 * Reported: the medians over the rounds, with the smallest and largest round ratio, and the load
 * average after every round (the machine may be shared).
 *
 * Run: `node --conditions=lia-source --import tsx bench/audio/transcription.ts [--rounds 6] [--per-round 5] [--files 4] [--seconds 60] [--container mp3] [--threads 0] [--settle 0] [--root DIR]`
 * (`--threads` sets onnxruntime's intra-op threads on both sides, 0: every core, as the
 * appliance's default; `--settle` an untimed pause in ms before every timed transcription;
 * `--root` runs the appliance of another checkout, built, such as an earlier commit's). Prints
 * the machine first and the table last, and writes `bench/results/transcription-<time>.json`.
 *
 * @module
 */
import { execFileSync, fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import OpenAI, { toFile } from 'openai';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { threadsFor } from '../../plugins/backend-transformers/backend.js';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { CONTAINERS, encode, tones } from '../../test/audio/signals.js';
import { createModel } from '../../test/helpers/models.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'per-round': { type: 'string', default: '5' },
    files: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '60' },
    container: { type: 'string', default: 'mp3' },
    threads: { type: 'string', default: '0' },
    root: { type: 'string' },
    settle: { type: 'string', default: '0' },
  },
});
const ROUNDS = Number(values.rounds);
const PER_ROUND = Number(values['per-round']);
const FILES = Number(values.files);
const SECONDS = Number(values.seconds);
const CONTAINER = values.container;
const THREADS = threadsFor(Number(values.threads));
/** The checkout whose appliance runs: this one, or another (built) to measure an earlier commit the same way. */
const SETTLE_MS = Number(values.settle);
const ROOT = values.root ? path.resolve(values.root) : undefined;
if (!CONTAINERS[CONTAINER]) throw new Error(`--container is one of ${Object.keys(CONTAINERS).join(', ')}`);

const WORDS = (
  'ALPHA BRAVO CHARLIE DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA MIKE NOVEMBER OSCAR PAPA ' +
  'QUEBEC ROMEO SIGMA TANGO UNIFORM VICTOR WHISKEY XRAY YODEL ZULU RIVER STONE GARDEN WINDOW MARKET ' +
  'BRIDGE AUTUMN WINTER NORTH SOUTH LIGHT QUIET VOICE MODEL SOUND'
).split(' ');

/**
 * A text of about `seconds` of tones (test/audio/signals.ts), new for each `seed`. No word has a
 * doubled letter: the pipeline drops the blank between two equal letters before it merges
 * repeats, and reads SUMMER as SUMER (docs/audio.md), which would fail its check.
 */
function textOf(seed: number, seconds: number): string {
  const words: string[] = [];
  let state = seed * 7919 + 1;
  let length = 0.2;
  while (length < seconds) {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    const word = WORDS[state % WORDS.length]!;
    words.push(word);
    // tones(): 0.18 s per character, 0.2 s more per space.
    length += (word.length + 1) * 0.18 + 0.2;
  }
  return words.join(' ');
}

/** A file of the workload: its text, its encoded bytes, where it lies, how long it plays as ffmpeg decodes it. */
interface AudioFile {
  text: string;
  bytes: Buffer;
  path: string;
  seconds: number;
}

/**
 * undici's `fetch` over the appliance's open connections, for the SDK. undici's own fetch does not
 * encode Node's global FormData (the SDK's multipart upload): the body goes as the bytes and
 * boundary the platform encodes it to, as test/helpers/openai-schema.ts sends it.
 */
function uploadingFetch(dispatcher: Dispatcher): typeof fetch {
  const send = async (url: string, init: RequestInit = {}) => {
    if (init.body instanceof globalThis.FormData) {
      const encoded = new Response(init.body);
      const headers = Object.fromEntries(new Headers(init.headers).entries());
      headers['content-type'] = encoded.headers.get('content-type')!;
      init = { ...init, headers, body: Buffer.from(await encoded.arrayBuffer()) };
    }
    return undiciFetch(url, { ...(init as object), dispatcher });
  };
  // The SDK asks `fetch.Response` whether global FormData bodies are encoded: here they are.
  return Object.assign(send, { Response: globalThis.Response }) as unknown as typeof fetch;
}

/**
 * CPU milliseconds `pid` and the children it has waited for have used (/proc's utime, stime,
 * cutime and cstime, in 10 ms ticks): the appliance with its ffmpeg, or this process with the bare
 * side's ffmpeg and pipeline.
 */
function cpuMs(pid: number | 'self'): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  return (fields[11]! + fields[12]! + fields[13]! + fields[14]!) * 10;
}

/** The short commit of the checkout at `root`, or `unknown`. */
function commitOf(root: string): string {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** Fails the run unless `got` is the text the file was made from. */
function check(side: string, file: AudioFile, got: string): void {
  if (got.trim() !== file.text) throw new Error(`${side} transcribed ${JSON.stringify(got.slice(0, 120))}, not ${JSON.stringify(file.text.slice(0, 120))}`);
}

type Transcribe = (file: AudioFile) => Promise<void>;

/** The bare side's process (bare-asr.ts), loaded; fills in each file's duration as its ffmpeg decodes it. */
async function startBare(folder: string, files: AudioFile[]) {
  const child = fork(path.join(import.meta.dirname, 'bare-asr.ts'), [folder, String(THREADS), ...files.map((f) => f.path)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<number, { resolve(text: string): void; reject(err: Error): void }>();
  let next = 0;
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare-asr.ts exited ${code}`)));
    child.on('message', (m: { ready?: boolean; seconds?: number[]; id?: number; text?: string; error?: string }) => {
      if (m.ready) {
        m.seconds!.forEach((s, i) => (files[i]!.seconds = s));
        return resolve();
      }
      const w = waiting.get(m.id!)!;
      waiting.delete(m.id!);
      if (m.error !== undefined) w.reject(new Error(m.error));
      else w.resolve(m.text!);
    });
  });
  return {
    pid: child.pid!,
    transcribe: (file: number, decoded: boolean): Promise<string> =>
      new Promise((resolve, reject) => {
        const id = next++;
        waiting.set(id, { resolve, reject });
        child.send({ id, file, decoded });
      }),
    close: () => child.disconnect(),
  };
}

async function main(): Promise<void> {
  const machine = machineInfo();
  console.log(machineLine(machine));
  const folder = await builtFixture('tiny-ctc', console.error);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-bench-audio-'));
  const files: AudioFile[] = [];
  for (let i = 0; i < FILES; i++) {
    const text = textOf(i, SECONDS);
    const bytes = encode(tones(text).samples, CONTAINER);
    const file = path.join(dir, `speech-${i}.${CONTAINER}`);
    await writeFile(file, bytes);
    files.push({ text, bytes, path: file, seconds: 0 });
  }
  const bareProcess = await startBare(folder, files);

  const app = await startApplianceProcess(
    {
      plugins: {
        'host-network': false,
        'host-gpu': false,
        'host-services': false,
        webui: false,
        'backend-llama-cpp': false,
        'backend-llama-server': false,
        'api-anthropic': false,
        'api-openai': true,
        'backend-transformers': { options: { threads: THREADS } },
        engine: { options: { keepAlive: -1 } },
      },
    },
    {},
    ROOT,
  );
  try {
    await createModel(app, 'ctc', folder);
    const client = new OpenAI({
      baseURL: `${app.url}/v1`,
      apiKey: app.key,
      maxRetries: 0,
      timeout: 600_000,
      fetch: uploadingFetch(app.dispatcher()),
    });
    const viaApi: Transcribe = async (file) => {
      const res = await client.audio.transcriptions.create({ file: await toFile(file.bytes, path.basename(file.path)), model: 'ctc' });
      check('appliance', file, res.text);
    };

    const bare: Transcribe = async (file) => check('bare', file, await bareProcess.transcribe(files.indexOf(file), false));
    const library: Transcribe = async (file) => check('pipeline', file, await bareProcess.transcribe(files.indexOf(file), true));
    const sides: Record<string, Transcribe> = { appliance: viaApi, bare, pipeline: library };
    const names = Object.keys(sides);

    const timed = async (run: () => Promise<unknown>): Promise<number> => {
      if (SETTLE_MS > 0) await sleep(SETTLE_MS);
      const t0 = performance.now();
      await run();
      return (performance.now() - t0) / 1000;
    };

    // Warm-up: loads the model in the appliance, opens connections, runs every side on every file.
    for (const file of files) for (const name of names) await sides[name]!(file);
    await Promise.all(files.map(viaApi));

    type Round = {
      rtf: Record<string, number>;
      cpuMs: Record<string, number>;
      concurrent: { appliance: number; bare: number; pipeline: number };
      ratioA: number;
      ratioB: number;
      load: number[];
    };
    const rounds: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // (a) one file at a time, the sides taking turns request by request.
      const walls: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
      const cpu: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
      let client = 0;
      for (let i = 0; i < PER_ROUND; i++) {
        for (let k = 0; k < names.length; k++) {
          const name = names[(r + i + k) % names.length]!;
          const [self, server, library] = [cpuMs('self'), cpuMs(app.pid), cpuMs(bareProcess.pid)];
          walls[name]!.push(await timed(() => sides[name]!(files[0]!)));
          if (name === 'appliance') {
            client += cpuMs('self') - self;
            cpu[name]! += cpuMs('self') - self + cpuMs(app.pid) - server;
          } else cpu[name]! += cpuMs(bareProcess.pid) - library;
        }
      }
      const rtf = Object.fromEntries(names.map((n) => [n, files[0]!.seconds / median(walls[n]!)]));
      const cpuPerFile = Object.fromEntries([...names.map((n) => [n, cpu[n]! / PER_ROUND]), ['client', client / PER_ROUND]]);
      // (b) the files together on the appliance, one after another on the bare side.
      const concurrent = { appliance: 0, bare: 0, pipeline: 0 };
      const order = r % 2 === 0 ? (['appliance', 'bare', 'pipeline'] as const) : (['pipeline', 'bare', 'appliance'] as const);
      for (const name of order) {
        concurrent[name] = await timed(async () => {
          if (name === 'appliance') await Promise.all(files.map(viaApi));
          else for (const file of files) await sides[name]!(file);
        });
      }
      const round: Round = {
        rtf,
        cpuMs: cpuPerFile,
        concurrent,
        ratioA: rtf['appliance']! / rtf['bare']!,
        ratioB: concurrent.bare / concurrent.appliance,
        load: os.loadavg().map((l) => Math.round(l * 100) / 100),
      };
      rounds.push(round);
      console.error(
        `round ${r + 1}/${ROUNDS}: (a) real-time factor appliance ${rtf['appliance']!.toFixed(0)}, bare ${rtf['bare']!.toFixed(0)}, pipeline ${rtf['pipeline']!.toFixed(0)}, ratio ${round.ratioA.toFixed(3)}; ` +
          `CPU ms appliance ${cpuPerFile['appliance']!.toFixed(0)} (of which the client ${cpuPerFile['client']!.toFixed(0)}), bare ${cpuPerFile['bare']!.toFixed(0)}; (b) ${FILES} files: appliance together ${concurrent.appliance.toFixed(3)} s, bare in turn ${concurrent.bare.toFixed(3)} s, pipeline in turn ${concurrent.pipeline.toFixed(3)} s, ratio ${round.ratioB.toFixed(3)}; load ${round.load.join(' / ')}`,
      );
    }

    const spreadOf = (xs: number[]) => ({ median: round3(median(xs)), min: round3(Math.min(...xs)), max: round3(Math.max(...xs)) });
    const result = {
      a: {
        realTimeFactor: Object.fromEntries(names.map((n) => [n, Math.round(median(rounds.map((x) => x.rtf[n]!)))])),
        ratio: spreadOf(rounds.map((x) => x.ratioA)),
        pipelineOverBare: spreadOf(rounds.map((x) => x.rtf['pipeline']! / x.rtf['bare']!)),
        cpuMsPerFile: Object.fromEntries([...names, 'client'].map((n) => [n, Math.round(median(rounds.map((x) => x.cpuMs[n]!)))])),
        cpuRatio: spreadOf(rounds.map((x) => x.cpuMs['bare']! / x.cpuMs['appliance']!)),
        target: 'appliance ÷ bare ≥ 0.95',
      },
      b: {
        seconds: {
          appliance: round3(median(rounds.map((x) => x.concurrent.appliance))),
          bare: round3(median(rounds.map((x) => x.concurrent.bare))),
          pipeline: round3(median(rounds.map((x) => x.concurrent.pipeline))),
        },
        ratio: spreadOf(rounds.map((x) => x.ratioB)),
        target: 'bare in turn ÷ appliance together ≥ 1.0',
      },
    };
    const loadAfter = os.loadavg().map((l) => l.toFixed(2));
    console.log(`\n${machineLine(machine)}; load ${loadAfter.join(' / ')} after the run`);
    console.log(
      `tiny-ctc, ${FILES} ${CONTAINER} files of ${files.map((f) => f.seconds.toFixed(1)).join(', ')} s (${files.map((f) => f.bytes.length).join(', ')} bytes), onnxruntime threads ${THREADS}, ${ROUNDS} rounds, (a) ${PER_ROUND} transcriptions per side per round`,
    );
    console.log(`${'figure'.padEnd(44)}${'appliance'.padStart(12)}${'bare'.padStart(10)}${'pipeline'.padStart(10)}${'ratio'.padStart(8)}   rounds`);
    const a = result.a;
    console.log(
      `${'(a) real-time factor, one file at a time'.padEnd(44)}${String(a.realTimeFactor['appliance']).padStart(12)}${String(a.realTimeFactor['bare']).padStart(10)}${String(a.realTimeFactor['pipeline']).padStart(10)}${a.ratio.median.toFixed(3).padStart(8)}   ${a.ratio.min.toFixed(3)}-${a.ratio.max.toFixed(3)}`,
    );
    console.log(
      `${'(a) CPU ms per file, every process of a side'.padEnd(44)}${String(a.cpuMsPerFile['appliance']).padStart(12)}${String(a.cpuMsPerFile['bare']).padStart(10)}${String(a.cpuMsPerFile['pipeline']).padStart(10)}${a.cpuRatio.median.toFixed(3).padStart(8)}   ${a.cpuRatio.min.toFixed(3)}-${a.cpuRatio.max.toFixed(3)}`,
    );
    const b = result.b;
    console.log(
      `${`(b) ${FILES} files, wall seconds`.padEnd(44)}${b.seconds.appliance.toFixed(3).padStart(12)}${b.seconds.bare.toFixed(3).padStart(10)}${b.seconds.pipeline.toFixed(3).padStart(10)}${b.ratio.median.toFixed(3).padStart(8)}   ${b.ratio.min.toFixed(3)}-${b.ratio.max.toFixed(3)}`,
    );
    console.log(
      '(a) ratio: appliance ÷ bare real-time factor (target ≥ 0.95); CPU ratio: bare ÷ appliance; (b) ratio: bare in turn ÷ appliance together (target ≥ 1.0)',
    );
    console.log('bare: ffmpeg decode of the file + pipeline; pipeline: the same pipeline on samples decoded beforehand (reference, no target)');
    const saved = await saveResult('transcription', {
      machine,
      model: 'tiny-ctc',
      root: ROOT ? path.basename(ROOT) : 'this checkout',
      commit: commitOf(ROOT ?? path.resolve(import.meta.dirname, '..', '..')),
      // The niceness the run had (a busy shared machine: `nice -n -10` keeps other work off both sides alike).
      priority: os.getPriority(),
      container: CONTAINER,
      files: files.map((f) => ({ seconds: round3(f.seconds), bytes: f.bytes.length, words: f.text.split(' ').length })),
      threads: THREADS,
      perRound: PER_ROUND,
      result,
      rounds,
    });
    console.log(`raw: ${path.relative(process.cwd(), saved)}`);
  } finally {
    bareProcess.close();
    await app.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
