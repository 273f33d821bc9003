/**
 * Transcription speed: the appliance (its own `lia serve` process, HTTPS, a key) answering the
 * `openai` SDK's `audio.transcriptions.create` against a bare transformers.js
 * `pipeline('automatic-speech-recognition', folder)` on the same model, in this process, in the
 * same run, the sides alternating.
 *
 * Model: the `tiny-ctc` fixture (`npm run fixtures`; built here on first use otherwise), a
 * designed `Wav2Vec2ForCTC` graph that reads text written as tones (test/audio/signals.ts) back
 * exactly, with a 10 s window. Audio: `--files` texts of `--seconds` seconds each (upper-case
 * words from a fixed list, a fixed seed), written as tones at 16 kHz and encoded by ffmpeg as
 * `--container` (mp3 at 44.1 kHz by default), so both sides decode and resample. Every answer is
 * checked against the text it was made from: a side that returns anything else stops the run.
 *
 * The sides:
 * - `appliance`: the encoded file uploaded as multipart; the appliance writes it to a private
 *   temporary file, decodes it with ffmpeg, cuts it into 10 s windows at pauses, runs each window
 *   through the feature extractor and the network, reads the characters and times every word.
 * - `bare`: what a user of the library writes for the same file: ffmpeg decodes the file (on disk
 *   already) to mono float samples at 16 kHz on a pipe, and the pipeline transcribes them. The
 *   pipeline gets the whole file in one pass (transformers.js does not chunk wav2vec2 audio) and
 *   returns text only, no word times. Its session runs the options the appliance gives its own
 *   (`sessionOptions`: the same threads, no spinning, the memory arena).
 * - `pipeline` (reference, no target): the same pipeline on samples decoded before the timing,
 *   i.e. the library and the model alone.
 *
 * Figures, per round:
 * - (a) real-time factor, audio seconds ÷ wall seconds, of `--per-round` transcriptions of file 0
 *   one after another on each side, the sides taking turns request by request (order rotating).
 *   Target: appliance ÷ bare ≥ 0.95.
 * - (b) the `--files` files (4 by default) transcribed by the appliance as concurrent requests,
 *   against the bare side transcribing them one after another; the order of the sides alternates
 *   between rounds. Target: bare total ÷ appliance total ≥ 1.0.
 * Reported: the medians over the rounds, with the smallest and largest round ratio, and the load
 * average after every round (the machine may be shared).
 *
 * Run: `node --conditions=lia-source --import tsx bench/audio/transcription.ts [--rounds 6] [--per-round 3] [--files 4] [--seconds 60] [--container mp3] [--threads 0] [--root DIR]`
 * (`--threads` sets onnxruntime's intra-op threads on both sides, 0: every core, as the
 * appliance's default; `--root` runs the appliance of another checkout, built, such as an earlier
 * commit's). Prints the machine first and the table last, and writes
 * `bench/results/transcription-<time>.json`.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI, { toFile } from 'openai';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { threadsFor } from '../../plugins/backend-transformers/backend.js';
import { sessionOptions } from '../../plugins/backend-transformers/onnx-model.js';
import { transformers } from '../../plugins/backend-transformers/runtime.js';
import { builtFixture } from '../../scripts/fixtures/build.js';
import { CONTAINERS, encode, RATE, tones } from '../../test/audio/signals.js';
import { createModel } from '../../test/helpers/models.js';
import { startApplianceProcess } from '../lib/appliance-process.js';
import { machineInfo, machineLine } from '../lib/machine.js';
import { saveResult } from '../lib/results.js';
import { median } from '../lib/stats.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'per-round': { type: 'string', default: '3' },
    files: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '60' },
    container: { type: 'string', default: 'mp3' },
    threads: { type: 'string', default: '0' },
    root: { type: 'string' },
  },
});
const ROUNDS = Number(values.rounds);
const PER_ROUND = Number(values['per-round']);
const FILES = Number(values.files);
const SECONDS = Number(values.seconds);
const CONTAINER = values.container;
const THREADS = threadsFor(Number(values.threads));
/** The checkout whose appliance runs: this one, or another (built) to measure an earlier commit the same way. */
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

/** A file of the workload: its text, its encoded bytes, where it lies, how long it plays, its samples as the bare side's ffmpeg decodes them. */
interface AudioFile {
  text: string;
  bytes: Buffer;
  path: string;
  seconds: number;
  samples: Float32Array;
}

/** What a user of the library runs to read an audio file: ffmpeg to mono float samples at `rate` on a pipe. */
function ffmpegDecode(file: string, rate: number): Promise<Float32Array> {
  return new Promise((resolve, reject) => {
    const child = spawn('ffmpeg', ['-nostdin', '-hide_banner', '-loglevel', 'error', '-i', file, '-ac', '1', '-ar', String(rate), '-f', 'f32le', 'pipe:1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`ffmpeg exited ${code}: ${stderr}`));
      const all = Buffer.concat(chunks);
      resolve(new Float32Array(all.buffer, all.byteOffset, Math.floor(all.byteLength / 4)).slice());
    });
  });
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

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** Fails the run unless `got` is the text the file was made from. */
function check(side: string, file: AudioFile, got: string): void {
  if (got.trim() !== file.text) throw new Error(`${side} transcribed ${JSON.stringify(got.slice(0, 120))}, not ${JSON.stringify(file.text.slice(0, 120))}`);
}

type Transcribe = (file: AudioFile) => Promise<void>;

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
    const samples = await ffmpegDecode(file, RATE);
    files.push({ text, bytes, path: file, seconds: samples.length / RATE, samples });
  }

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

    const { pipeline } = await transformers();
    const asr = await pipeline('automatic-speech-recognition', folder, {
      dtype: 'fp32',
      device: 'cpu',
      local_files_only: true,
      session_options: sessionOptions({ threads: THREADS, maxBatchTokens: 4096, memoryArena: true, sizeBytes: 0 }),
    });
    const transcribeSamples = async (samples: Float32Array): Promise<string> => {
      const out = (await asr(samples)) as { text: string } | { text: string }[];
      return Array.isArray(out) ? out[0]!.text : out.text;
    };
    const bare: Transcribe = async (file) => check('bare', file, await transcribeSamples(await ffmpegDecode(file.path, RATE)));
    const library: Transcribe = async (file) => check('pipeline', file, await transcribeSamples(file.samples));
    const sides: Record<string, Transcribe> = { appliance: viaApi, bare, pipeline: library };
    const names = Object.keys(sides);

    const timed = async (run: () => Promise<unknown>): Promise<number> => {
      const t0 = performance.now();
      await run();
      return (performance.now() - t0) / 1000;
    };

    // Warm-up: loads the model in the appliance, opens connections, runs every side on every file.
    for (const file of files) for (const name of names) await sides[name]!(file);
    await Promise.all(files.map(viaApi));

    type Round = {
      rtf: Record<string, number>;
      concurrent: { appliance: number; bare: number; pipeline: number };
      ratioA: number;
      ratioB: number;
      load: number[];
    };
    const rounds: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // (a) one file at a time, the sides taking turns request by request.
      const spent: Record<string, number> = Object.fromEntries(names.map((n) => [n, 0]));
      for (let i = 0; i < PER_ROUND; i++) {
        for (let k = 0; k < names.length; k++) {
          const name = names[(r + i + k) % names.length]!;
          spent[name]! += await timed(() => sides[name]!(files[0]!));
        }
      }
      const rtf = Object.fromEntries(names.map((n) => [n, (PER_ROUND * files[0]!.seconds) / spent[n]!]));
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
        concurrent,
        ratioA: rtf['appliance']! / rtf['bare']!,
        ratioB: concurrent.bare / concurrent.appliance,
        load: os.loadavg().map((l) => Math.round(l * 100) / 100),
      };
      rounds.push(round);
      console.error(
        `round ${r + 1}/${ROUNDS}: (a) real-time factor appliance ${rtf['appliance']!.toFixed(0)}, bare ${rtf['bare']!.toFixed(0)}, pipeline ${rtf['pipeline']!.toFixed(0)}, ratio ${round.ratioA.toFixed(3)}; ` +
          `(b) ${FILES} files: appliance together ${concurrent.appliance.toFixed(3)} s, bare in turn ${concurrent.bare.toFixed(3)} s, pipeline in turn ${concurrent.pipeline.toFixed(3)} s, ratio ${round.ratioB.toFixed(3)}; load ${round.load.join(' / ')}`,
      );
    }

    const spreadOf = (xs: number[]) => ({ median: round3(median(xs)), min: round3(Math.min(...xs)), max: round3(Math.max(...xs)) });
    const result = {
      a: {
        realTimeFactor: Object.fromEntries(names.map((n) => [n, Math.round(median(rounds.map((x) => x.rtf[n]!)))])),
        ratio: spreadOf(rounds.map((x) => x.ratioA)),
        pipelineOverBare: spreadOf(rounds.map((x) => x.rtf['pipeline']! / x.rtf['bare']!)),
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
    const b = result.b;
    console.log(
      `${`(b) ${FILES} files, wall seconds`.padEnd(44)}${b.seconds.appliance.toFixed(3).padStart(12)}${b.seconds.bare.toFixed(3).padStart(10)}${b.seconds.pipeline.toFixed(3).padStart(10)}${b.ratio.median.toFixed(3).padStart(8)}   ${b.ratio.min.toFixed(3)}-${b.ratio.max.toFixed(3)}`,
    );
    console.log('(a) ratio: appliance ÷ bare real-time factor (target ≥ 0.95); (b) ratio: bare in turn ÷ appliance together (target ≥ 1.0)');
    console.log('bare: ffmpeg decode of the file + pipeline; pipeline: the same pipeline on samples decoded beforehand (reference, no target)');
    const saved = await saveResult('transcription', {
      machine,
      model: 'tiny-ctc',
      root: ROOT ? path.basename(ROOT) : 'this checkout',
      container: CONTAINER,
      files: files.map((f) => ({ seconds: round3(f.seconds), bytes: f.bytes.length, words: f.text.split(' ').length })),
      threads: THREADS,
      perRound: PER_ROUND,
      result,
      rounds,
    });
    console.log(`raw: ${path.relative(process.cwd(), saved)}`);
    await asr.dispose();
  } finally {
    await app.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
