/**
 * Spoken audio encoded by Debian's `ffmpeg`, run as a separate program as decoding is
 * (docs/decisions.md): the engine writes each part's mono float samples to ffmpeg's stdin as
 * soon as the model has spoken it, and ffmpeg's stdout, the encoded bytes, is read as it comes
 * (`-flush_packets 1`: every packet leaves at once), so the answer streams from the first
 * sentence. ffmpeg resamples to {@link SPEECH_RATE}, changes the speed with `atempo` (the pitch
 * kept) and encodes in one pass. No codec is written here.
 *
 * @module
 */
import { spawn } from 'node:child_process';
import { Errors } from 'lia/plugin';
import type { SpeechFormat } from './public.js';
import { ffmpegMessage } from './audio.js';

/** The rate of every encoded answer, in Hz: OpenAI's (its `pcm` is documented at 24 kHz). */
export const SPEECH_RATE = 24000;

/** ffmpeg's output options and the media type of each format. */
export const SPEECH_FORMATS: Record<SpeechFormat, { args: string[]; contentType: string }> = {
  mp3: { args: ['-c:a', 'libmp3lame', '-b:a', '64k', '-f', 'mp3'], contentType: 'audio/mpeg' },
  // Ogg Opus, as OpenAI's `opus`; a decoder reads Opus at 48 kHz whatever rate went in.
  opus: { args: ['-c:a', 'libopus', '-b:a', '32k', '-f', 'ogg'], contentType: 'audio/ogg' },
  // AAC in ADTS frames: a stream a player starts reading anywhere, which MP4 is not.
  aac: { args: ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts'], contentType: 'audio/aac' },
  flac: { args: ['-c:a', 'flac', '-sample_fmt', 's16', '-f', 'flac'], contentType: 'audio/flac' },
  // Streamed, the RIFF and data sizes cannot be known: ffmpeg writes 0xFFFFFFFF, which readers take as "to the end".
  wav: { args: ['-c:a', 'pcm_s16le', '-f', 'wav'], contentType: 'audio/wav' },
  pcm: { args: ['-c:a', 'pcm_s16le', '-f', 's16le'], contentType: 'audio/pcm' },
};

/** `atempo` filters for `speed`, each within 0.5 to 2 (where the filter sounds best); none for 1. */
export function tempoFilter(speed: number): string | null {
  if (speed === 1) return null;
  const steps: number[] = [];
  let rest = speed;
  while (rest < 0.5) {
    steps.push(0.5);
    rest /= 0.5;
  }
  while (rest > 2) {
    steps.push(2);
    rest /= 2;
  }
  steps.push(rest);
  return steps.map((s) => `atempo=${Number(s.toFixed(6))}`).join(',');
}

/** A running ffmpeg encoder. */
export interface SpeechEncoder {
  /** Hands samples to ffmpeg; resolves once ffmpeg has taken them (back-pressure from a slow client). */
  write(samples: Float32Array): Promise<void>;
  /** No more samples: ffmpeg finishes the file. */
  end(): void;
  /** Kills ffmpeg (a no-op once it has exited); `output` then throws `reason`. */
  kill(reason: Error): void;
  /** The encoded bytes as ffmpeg writes them; ends when ffmpeg exits cleanly, throws otherwise. */
  output: AsyncIterable<Buffer>;
}

/** Starts ffmpeg encoding mono float samples at `inputRate` into `format` at {@link SPEECH_RATE}. */
export function startEncoder(format: SpeechFormat, inputRate: number, speed: number, ffmpeg = 'ffmpeg'): SpeechEncoder {
  const filter = tempoFilter(speed);
  const args = [
    '-nostdin',
    '-hide_banner',
    '-loglevel',
    'error',
    // Raw samples need no probing; without these ffmpeg reads 5 MB or 5 s of them before it writes anything.
    '-probesize',
    '32',
    '-analyzeduration',
    '0',
    '-f',
    'f32le',
    '-ar',
    String(inputRate),
    '-ac',
    '1',
    '-i',
    'pipe:0',
    ...(filter ? ['-af', filter] : []),
    '-ac',
    '1',
    '-ar',
    String(SPEECH_RATE),
    // No encoder tag or metadata in the file: the same input gives the same bytes.
    '-map_metadata',
    '-1',
    '-fflags',
    '+bitexact',
    ...SPEECH_FORMATS[format].args,
    '-flush_packets',
    '1',
    'pipe:1',
  ];
  const child = spawn(ffmpeg, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let failure: Error | undefined;
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const kill = (reason: Error) => {
    failure ??= reason;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  child.on('error', (err: NodeJS.ErrnoException) =>
    kill(
      err.code === 'ENOENT'
        ? Errors.unavailable('encoding speech needs ffmpeg, which is not installed (Debian: apt-get install ffmpeg)')
        : Errors.unavailable(`ffmpeg could not be started: ${err.message}`),
    ),
  );
  // A write after ffmpeg died fails with EPIPE; the exit says why.
  child.stdin.on('error', () => undefined);
  child.stderr.on('data', (chunk: Buffer) => {
    if (stderr.length < 4096) stderr += chunk.toString('utf8');
  });
  async function* output(): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of child.stdout) {
        if (failure) break;
        yield chunk as Buffer;
      }
      const code = await exited;
      if (failure) throw failure;
      if (code !== 0) throw Errors.engineFailed(`ffmpeg could not encode the speech as ${format}${stderr ? ` (${ffmpegMessage(stderr, 'pipe:0')})` : ''}`);
    } finally {
      kill(new Error('the speech was left before its end'));
    }
  }
  return {
    write(samples) {
      if (failure) return Promise.reject(failure);
      const bytes = Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength);
      return new Promise<void>((resolve, reject) => {
        const onClose = () => reject(failure ?? Errors.engineFailed('ffmpeg exited before the speech was written'));
        child.once('close', onClose);
        const written = () => {
          child.off('close', onClose);
          resolve();
        };
        if (child.stdin.write(bytes)) written();
        else child.stdin.once('drain', written);
      });
    },
    end() {
      if (!child.stdin.writableEnded) child.stdin.end();
    },
    kill,
    output: output(),
  };
}
