/**
 * Audio for speech models: an uploaded file decoded and resampled by Debian's `ffmpeg`, run as a
 * separate program (docs/decisions.md), into mono float samples at the model's rate; and the
 * cutting of long audio into the model's windows. No codec is written here.
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

/**
 * Decodes `file` into mono float samples at `sampleRate`. Throws a 400 for a file that is empty,
 * ends early, is not audio ffmpeg reads or is longer than the limit; a 503 when ffmpeg is not
 * installed.
 */
export async function decodeAudio(file: Uint8Array, sampleRate: number, limits: DecodeLimits, signal?: AbortSignal): Promise<Float32Array> {
  if (file.byteLength === 0) throw Errors.badRequest('the audio file is empty', { param: 'file' });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-audio-'));
  try {
    const input = path.join(dir, 'upload');
    await writeFile(input, withWavSizes(file), { mode: 0o600 });
    return await runFfmpeg(input, sampleRate, limits, signal);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The "length unknown" value a streamed WAV carries in its RIFF and data sizes. */
const UNKNOWN_SIZE = 0xffffffff;

/**
 * A WAV written as a stream (LIA's and OpenAI's speech with `response_format: "wav"`) cannot
 * know its length when its header leaves: its RIFF and data sizes say {@link UNKNOWN_SIZE}, and
 * ffmpeg reads its last, short packet as a truncated one. The upload is whole, so those sizes
 * are filled in from its length (a copy; other files are returned as they are, and a WAV with
 * real sizes that ends early stays truncated).
 */
export function withWavSizes(file: Uint8Array): Uint8Array {
  const bytes = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  if (bytes.length < 12 || bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') return file;
  if (bytes.readUInt32LE(4) !== UNKNOWN_SIZE) return file;
  const out = Buffer.from(bytes);
  out.writeUInt32LE(out.length - 8, 4);
  for (let offset = 12; offset + 8 <= out.length;) {
    const size = out.readUInt32LE(offset + 4);
    if (out.toString('latin1', offset, offset + 4) === 'data') {
      if (size === UNKNOWN_SIZE) out.writeUInt32LE(out.length - offset - 8, offset + 4);
      break;
    }
    offset += 8 + size + (size % 2);
  }
  return out;
}

function runFfmpeg(input: string, sampleRate: number, limits: DecodeLimits, signal?: AbortSignal): Promise<Float32Array> {
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
  return new Promise((resolve, reject) => {
    const child = spawn(limits.ffmpeg ?? 'ffmpeg', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let bytes = 0;
    let stderr = '';
    let failure: Error | undefined;
    const stop = (err: Error) => {
      failure ??= err;
      child.kill('SIGKILL');
    };
    const timer = setTimeout(
      () => stop(Errors.badRequest(`the audio file took longer than ${limits.timeoutMs / 1000} s to decode`, { param: 'file' })),
      limits.timeoutMs,
    );
    const onAbort = () => stop(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > maxBytes) stop(Errors.badRequest(`the audio is longer than ${limits.maxSeconds} s, the most a request may carry`, { param: 'file' }));
      else chunks.push(chunk);
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
      if (failure) return reject(failure);
      const message = ffmpegMessage(stderr, input);
      if (code !== 0 || message) {
        return reject(Errors.badRequest(`the audio file is truncated or not in a format LIA decodes${message ? ` (${message})` : ''}`, { param: 'file' }));
      }
      const all = Buffer.concat(chunks, bytes);
      const samples = new Float32Array(all.buffer, all.byteOffset, Math.floor(all.byteLength / 4));
      if (samples.length === 0) return reject(Errors.badRequest('the file holds no audio', { param: 'file' }));
      // A copy on its own buffer: Buffer.concat may hand out a slice of a shared pool.
      resolve(samples.slice());
    });
  });
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
 * Cuts `samples` into windows of at most `window` samples. Each cut falls in the middle of the
 * longest quiet stretch (20 ms frames within 4× the quietest one's energy) of the window's last
 * fifth, where speech pauses between words or phrases, or at the window's end when the audio is
 * shorter. Every sample is in exactly one window.
 */
export function planWindows(samples: Float32Array, window: number, sampleRate: number): AudioWindow[] {
  const out: AudioWindow[] = [];
  const frame = Math.max(1, Math.round(sampleRate * 0.02));
  let start = 0;
  while (start < samples.length) {
    const rest = samples.length - start;
    if (rest <= window) {
      out.push({ start, length: rest });
      break;
    }
    const from = start + Math.floor(window * 0.8);
    const energies: number[] = [];
    for (let f = from; f + frame <= start + window; f += frame) {
      let energy = 0;
      for (let i = f; i < f + frame; i++) energy += samples[i]! * samples[i]!;
      energies.push(energy);
    }
    let cut = start + window;
    if (energies.length > 0) {
      const quiet = Math.min(...energies) * 4 + frame * 1e-10;
      let best = { at: 0, length: 0 };
      for (let i = 0, run = 0; i < energies.length; i++) {
        run = energies[i]! <= quiet ? run + 1 : 0;
        if (run > best.length) best = { at: i - run + 1, length: run };
      }
      cut = from + Math.floor((best.at + best.length / 2) * frame);
    }
    out.push({ start, length: cut - start });
    start = cut;
  }
  return out;
}
