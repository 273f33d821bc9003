/**
 * Audio for speech models: an uploaded file decoded and resampled by Debian's `ffmpeg`, run as a
 * separate program (docs/decisions.md), into mono float samples at the model's rate, cut into the
 * model's windows as the samples arrive, so that the first windows are transcribed while ffmpeg
 * decodes the rest. No codec is written here.
 *
 * ffmpeg reads the upload from a private temporary file (an MP4 or M4A keeps its index at the
 * end, which a pipe cannot seek to), may open only the demuxers of the containers listed in
 * {@link DEMUXERS} (no playlists, no concat lists: a file cannot make it read another), stops at
 * the first decoding error (`-xerror`), and is killed past {@link DecodeLimits.timeoutMs} or
 * once its output passes {@link DecodeLimits.maxSeconds}. A file it cannot read, one that ends
 * early, or one that holds no audio is a 400 that says so; a missing ffmpeg is a 503 naming the
 * package.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Errors } from 'lia/plugin';

/**
 * The demuxers ffmpeg may open: those of the containers OpenAI accepts (flac, mp3, mp4, mpeg,
 * mpga, m4a, ogg, wav, webm) and the raw AAC and MPEG-TS streams such files are often cut from.
 */
export const DEMUXERS = ['wav', 'flac', 'mp3', 'mov', 'mp4', 'm4a', '3gp', '3g2', 'mj2', 'ogg', 'matroska', 'webm', 'aac', 'mpeg', 'mpegts'];

/** How much decoding a request may cost. */
export interface DecodeLimits {
  /** Seconds of audio at most; a longer file is a 400. */
  maxSeconds: number;
  /** Wall time of one decode. */
  timeoutMs: number;
  /** The ffmpeg to run. Defaults to `ffmpeg` on the PATH. */
  ffmpeg?: string;
}

/** Seconds of audio a request may carry by default (one hour: 230 MB of samples at 16 kHz). */
export const DEFAULT_MAX_AUDIO_SECONDS = 3600;

/** How long one decode may take by default. */
export const DEFAULT_DECODE_TIMEOUT_MS = 120_000;

/** A window of a recording and its samples, as decoding hands it out. */
export interface DecodedWindow extends AudioWindow {
  samples: Float32Array;
}

/** The windows of an upload as ffmpeg decodes it ({@link decodeWindows}). */
export interface AudioWindows extends AsyncIterable<DecodedWindow> {
  /** True once ffmpeg has ended without an error: the file is good and every window is known. */
  readonly decoded: boolean;
  /** Samples decoded so far; all of them once {@link decoded}. */
  readonly samples: number;
}

/**
 * Decodes `file` into mono float samples at `sampleRate` and hands out its windows of at most
 * `window` samples ({@link WindowCutter}) while ffmpeg goes on decoding: a window is cut as soon
 * as the samples pass its end, so the model transcribes it while the rest is decoded. ffmpeg's
 * output is read as it comes (never held back by the model), and the windows not yet taken wait
 * in order. Iterating throws a 400 for a file that is empty, ends early, is not audio ffmpeg reads
 * or is longer than the limit (at the window where that is found; windows handed out before may
 * come from a file that proves bad), a 503 when ffmpeg is not installed; leaving the loop early
 * kills ffmpeg. The temporary file is removed when the loop ends either way.
 */
export function decodeWindows(file: Uint8Array, sampleRate: number, window: number, limits: DecodeLimits, signal?: AbortSignal, param = 'file'): AudioWindows {
  const cutter = new WindowCutter(window, sampleRate);
  const ready: DecodedWindow[] = [];
  let decoded = false;
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const iterate = async function* (): AsyncGenerator<DecodedWindow> {
    if (file.byteLength === 0) throw Errors.badRequest('the audio file is empty', { param });
    const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-audio-'));
    let ffmpeg: Ffmpeg | undefined;
    try {
      const input = path.join(dir, 'upload');
      await writeFile(input, withWavSizes(file), { mode: 0o600 });
      ffmpeg = runFfmpeg(input, sampleRate, limits, param, signal, {
        data: (chunk) => {
          ready.push(...cutter.push(chunk));
          notify();
        },
        end: (err) => {
          ended = true;
          if (!err && cutter.samples === 0) err = Errors.badRequest('the file holds no audio', { param });
          if (err) failure = err;
          else {
            ready.push(...cutter.end());
            decoded = true;
          }
          notify();
        },
      });
      for (;;) {
        if (failure) throw failure;
        const next = ready.shift();
        if (next) yield next;
        else if (ended) return;
        else await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      await ffmpeg?.stop();
      await rm(dir, { recursive: true, force: true });
    }
  };
  return {
    get decoded() {
      return decoded;
    },
    get samples() {
      return cutter.samples;
    },
    [Symbol.asyncIterator]: iterate,
  };
}

/** A running ffmpeg: `stop` kills it if it still runs and resolves once it has exited. */
interface Ffmpeg {
  stop(): Promise<void>;
}

/**
 * Whether a RIFF or data size is a placeholder for "length unknown", not a length: what a WAV
 * written as a stream carries (0xFFFFFFFF from LIA's and OpenAI's speech, 0x7FFFF000 from
 * espeak-ng's `--stdout`, 0 from some recorders). No upload is 2 GB long, so any size that large is
 * one.
 */
const placeholder = (size: number) => size === 0 || size >= 0x7fff0000;

/**
 * A WAV written as a stream (LIA's and OpenAI's speech with `response_format: "wav"`, espeak-ng
 * writing to a pipe) cannot know its length when its header leaves: its RIFF and data sizes are
 * {@link placeholder}s, and ffmpeg reads its last, short packet as a truncated one. The upload is
 * whole, so those sizes are filled in from its length (a copy; other files are returned as they
 * are, and a WAV with real sizes that ends early stays truncated).
 */
export function withWavSizes(file: Uint8Array): Uint8Array {
  const bytes = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (bytes.length < 12 || bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return file;
  if (!placeholder(bytes.readUInt32LE(4))) return file;
  const out = Buffer.from(bytes);
  out.writeUInt32LE(out.length - 8, 4);
  for (let offset = 12; offset + 8 <= out.length;) {
    const size = out.readUInt32LE(offset + 4);
    if (out.toString('latin1', offset, offset + 4) === 'data') {
      if (placeholder(size)) out.writeUInt32LE(out.length - offset - 8, offset + 4);
      break;
    }
    offset += 8 + size + (size % 2);
  }
  return out;
}

function runFfmpeg(
  input: string,
  sampleRate: number,
  limits: DecodeLimits,
  param: string,
  signal: AbortSignal | undefined,
  on: { data(chunk: Buffer): void; end(err?: Error): void },
): Ffmpeg {
  const maxBytes = Math.ceil(limits.maxSeconds * sampleRate) * 4;
  const args = [
    '-nostdin',
    '-hide_banner',
    '-loglevel',
    'error',
    '-xerror',
    '-format_whitelist',
    DEMUXERS.join(','),
    '-i',
    input,
    '-map',
    '0:a:0',
    '-vn',
    '-ac',
    '1',
    '-ar',
    String(sampleRate),
    '-f',
    'f32le',
    'pipe:1',
  ];
  const child = spawn(limits.ffmpeg ?? 'ffmpeg', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let bytes = 0;
  let stderr = '';
  let failure: Error | undefined;
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = (err: Error) => {
    failure ??= err;
    child.kill('SIGKILL');
  };
  const timer = setTimeout(
    () => stop(Errors.badRequest(`the audio file took longer than ${limits.timeoutMs / 1000} s to decode`, { param })),
    limits.timeoutMs,
  );
  const onAbort = () => stop(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
  signal?.addEventListener('abort', onAbort, { once: true });
  child.stdout.on('data', (chunk: Buffer) => {
    if (failure) return;
    bytes += chunk.length;
    if (bytes > maxBytes) stop(Errors.badRequest(`the audio is longer than ${limits.maxSeconds} s, the most a request may carry`, { param }));
    else on.data(chunk);
  });
  child.stderr.on('data', (chunk: Buffer) => {
    if (stderr.length < 4096) stderr += chunk.toString('utf8');
  });
  child.on('error', (err: NodeJS.ErrnoException) => {
    stop(
      err.code === 'ENOENT'
        ? Errors.unavailable('decoding audio needs ffmpeg, which is not installed (Debian: apt-get install ffmpeg)')
        : Errors.unavailable(`ffmpeg could not be started: ${err.message}`),
    );
  });
  child.on('close', (code) => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
    if (failure) return on.end(failure);
    const message = ffmpegMessage(stderr, input);
    if (code !== 0 || message) {
      return on.end(Errors.badRequest(`the audio file is truncated or not in a format LIA decodes${message ? ` (${message})` : ''}`, { param }));
    }
    on.end();
  });
  return {
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        failure ??= new Error('stopped');
        child.kill('SIGKILL');
      }
      await closed;
    },
  };
}

/** ffmpeg's first error line, without the temporary path or the decoder's address. */
export function ffmpegMessage(stderr: string, input: string): string {
  const line = stderr
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.length > 0);
  if (!line) return '';
  return line
    .split(input)
    .join('file')
    .replace(/ @ 0x[0-9a-f]+\]/g, ']')
    .slice(0, 200);
}

/** One window of a long recording: its first sample and its length. */
export interface AudioWindow {
  start: number;
  length: number;
}

/**
 * Cuts audio that arrives in pieces (ffmpeg's `f32le` output, split anywhere, even inside a
 * sample) into windows of at most `window` samples. A window is cut as soon as the samples pass
 * its end: the cut falls in the middle of the longest quiet stretch (20 ms frames within 4× the
 * quietest one's energy) of the window's last fifth, where speech pauses between words or
 * phrases; {@link end} hands out the rest, which is at most a window. Every sample is in exactly
 * one window, and the windows are the same however the audio is split. The cutter holds one
 * window and the piece that passed it; each window handed out has its own samples.
 */
export class WindowCutter {
  #bytes: Uint8Array;
  #filled = 0;
  #start = 0;

  constructor(
    readonly window: number,
    readonly sampleRate: number,
  ) {
    // Grown as needed: a model may declare a window far longer than the audio it is sent.
    this.#bytes = new Uint8Array(Math.min(window * 4, 1 << 20) + 65536);
  }

  /** Samples taken in so far (a sample split between two pieces counts once whole). */
  get samples(): number {
    return this.#start + Math.floor(this.#filled / 4);
  }

  /** Takes in `piece` (samples, or their `f32le` bytes); returns the windows it completes. */
  push(piece: Float32Array | Uint8Array): DecodedWindow[] {
    const bytes = piece instanceof Uint8Array ? piece : new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength);
    if (this.#filled + bytes.length > this.#bytes.length) {
      const grown = new Uint8Array(Math.max(this.#bytes.length * 2, this.#filled + bytes.length));
      grown.set(this.#bytes.subarray(0, this.#filled));
      this.#bytes = grown;
    }
    this.#bytes.set(bytes, this.#filled);
    this.#filled += bytes.length;
    const out: DecodedWindow[] = [];
    while (Math.floor(this.#filled / 4) > this.window) {
      const held = new Float32Array(this.#bytes.buffer, 0, Math.floor(this.#filled / 4));
      const cut = cutPoint(held, this.window, this.sampleRate);
      out.push({ start: this.#start, length: cut, samples: held.slice(0, cut) });
      this.#bytes.copyWithin(0, cut * 4, this.#filled);
      this.#filled -= cut * 4;
      this.#start += cut;
    }
    return out;
  }

  /** After the last piece: the rest as the last window (none when nothing is left). */
  end(): DecodedWindow[] {
    const n = Math.floor(this.#filled / 4);
    if (n === 0) return [];
    const last = { start: this.#start, length: n, samples: new Float32Array(this.#bytes.buffer, 0, n).slice() };
    this.#start += n;
    this.#filled = 0;
    return [last];
  }
}

/**
 * Where to end the window that starts at `samples[0]`, when more than `window` samples follow:
 * the middle of the longest quiet stretch of its last fifth, or its end when that fifth is
 * shorter than a 20 ms frame.
 */
function cutPoint(samples: Float32Array, window: number, sampleRate: number): number {
  const frame = Math.max(1, Math.round(sampleRate * 0.02));
  const from = Math.floor(window * 0.8);
  const energies: number[] = [];
  for (let f = from; f + frame <= window; f += frame) {
    let energy = 0;
    for (let i = f; i < f + frame; i++) energy += samples[i]! * samples[i]!;
    energies.push(energy);
  }
  if (energies.length === 0) return window;
  const quiet = Math.min(...energies) * 4 + frame * 1e-10;
  let best = { at: 0, length: 0 };
  for (let i = 0, run = 0; i < energies.length; i++) {
    run = energies[i]! <= quiet ? run + 1 : 0;
    if (run > best.length) best = { at: i - run + 1, length: run };
  }
  return from + Math.floor((best.at + best.length / 2) * frame);
}
