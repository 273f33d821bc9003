/**
 * Audio for the speech tests: text written as tones the `tiny-ctc` fixture reads back
 * (scripts/fixtures/tiny-ctc.py: character i of `|A…Z'` is a tone of 300 + 100·i Hz) or words
 * as the tones `tiny-whisper` hears (scripts/fixtures/tiny-whisper.py), encoded by
 * Debian's ffmpeg into each container OpenAI accepts, and real speech from Debian's espeak-ng.
 * ffprobe and level helpers for the speech the appliance writes. A missing tool fails with the
 * package to install.
 *
 * @module
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const RATE = 16000;

/** The characters of the fixture's vocabulary after the special tokens, in band order. */
const CHARS = ['|', ...'ABCDEFGHIJKLMNOPQRSTUVWXYZ', "'"];

/** A word of a synthesised text and when its tones sound, in seconds. */
export interface PlacedWord {
  word: string;
  start: number;
  end: number;
}

/**
 * `text` (upper-case letters, apostrophes and spaces) as tones: `tone` seconds per character,
 * `gap` seconds of silence after each, a space as the delimiter's tone and `pause` seconds more
 * of silence (speech pauses longer between words than within them). Starts after `lead` seconds
 * of silence. Returns the samples at 16 kHz and where each word's tones are.
 */
export function tones(
  text: string,
  { tone = 0.12, gap = 0.06, pause = 0.2, amplitude = 0.3, lead = 0.1 } = {},
): { samples: Float32Array; words: PlacedWord[] } {
  const spaces = text.split(' ').length - 1;
  const total = Math.round((lead + text.length * (tone + gap) + spaces * pause + 0.1) * RATE);
  const samples = new Float32Array(total);
  const words: PlacedWord[] = [];
  let at = lead;
  let current: PlacedWord | null = null;
  for (const c of text) {
    const band = CHARS.indexOf(c === ' ' ? '|' : c);
    if (band < 0) throw new Error(`tones: ${JSON.stringify(c)} is not in the fixture's vocabulary`);
    const f = 300 + 100 * band;
    const from = Math.round(at * RATE);
    const n = Math.round(tone * RATE);
    for (let k = 0; k < n; k++) samples[from + k] = amplitude * Math.sin((2 * Math.PI * f * k) / RATE);
    if (c === ' ') current = null;
    else if (current) current.end = at + tone;
    else words.push((current = { word: '', start: at, end: at + tone }));
    if (current) current.word += c;
    at += tone + gap + (c === ' ' ? pause : 0);
  }
  return { samples, words };
}

/**
 * `words` as the `tiny-whisper` fixture hears them (scripts/fixtures/tiny-whisper.py): one tone
 * of `tone` seconds per word at its band's frequency (`bands`: word → Hz, a language's entry of
 * the fixture's design.json), `gap` seconds of silence between words, after `lead` seconds of
 * silence. Returns the samples at 16 kHz and where each word sounds.
 */
export function wordTones(
  bands: Record<string, number>,
  words: string[],
  { tone = 0.3, gap = 0.25, amplitude = 0.3, lead = 0.2 } = {},
): { samples: Float32Array; words: PlacedWord[] } {
  const samples = new Float32Array(Math.round((lead + words.length * (tone + gap) + 0.2) * RATE));
  const placed: PlacedWord[] = [];
  let at = lead;
  for (const word of words) {
    const f = bands[word];
    if (f === undefined) throw new Error(`wordTones: ${JSON.stringify(word)} has no band in the fixture's design`);
    const from = Math.round(at * RATE);
    const n = Math.round(tone * RATE);
    for (let k = 0; k < n; k++) samples[from + k] = amplitude * Math.sin((2 * Math.PI * f * k) / RATE);
    placed.push({ word, start: at, end: at + tone });
    at += tone + gap;
  }
  return { samples, words: placed };
}

/** ffmpeg's output options for each container OpenAI accepts, by file extension. */
export const CONTAINERS: Record<string, string[]> = {
  flac: ['-f', 'flac'],
  mp3: ['-f', 'mp3', '-b:a', '128k'],
  mp4: ['-f', 'mp4', '-c:a', 'aac', '-b:a', '128k'],
  mpeg: ['-f', 'mpeg', '-c:a', 'mp2', '-b:a', '192k'],
  mpga: ['-f', 'mp3', '-b:a', '128k'],
  m4a: ['-f', 'ipod', '-c:a', 'aac', '-b:a', '128k'],
  ogg: ['-f', 'ogg', '-c:a', 'libopus', '-b:a', '96k'],
  wav: ['-f', 'wav', '-c:a', 'pcm_s16le'],
  webm: ['-f', 'webm', '-c:a', 'libopus', '-b:a', '96k'],
};

function tool(cmd: string, args: string[], input: Buffer | undefined, pkg: string): Buffer {
  const res = spawnSync(cmd, args, { input, maxBuffer: 256 * 1024 * 1024 });
  if (res.error) throw new Error(`${cmd} is needed for this test (Debian: apt-get install ${pkg}): ${res.error.message}`);
  if (res.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${res.stderr.toString()}`);
  return res.stdout;
}

/** Samples (mono, `rate` Hz) encoded by ffmpeg as `container` (a key of {@link CONTAINERS}), at `outRate` Hz (48 kHz for Opus). */
export function encode(samples: Float32Array, container: string, { rate = RATE, outRate = 44100 } = {}): Buffer {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lia-audio-test-'));
  try {
    // A file, not a pipe: the MP4 and M4A muxers go back to write their index.
    const out = path.join(dir, `audio.${container}`);
    const raw = path.join(dir, 'audio.f32');
    writeFileSync(raw, Buffer.from(samples.buffer, samples.byteOffset, samples.byteLength));
    // Opus encodes at 48 kHz and a few rates below, not 44.1 kHz.
    const to = CONTAINERS[container]!.includes('libopus') ? 48000 : outRate;
    const args = ['-nostdin', '-hide_banner', '-loglevel', 'error', '-f', 'f32le', '-ar', String(rate), '-ac', '1', '-i', raw, '-ar', String(to)];
    tool('ffmpeg', [...args, ...CONTAINERS[container]!, out], undefined, 'ffmpeg');
    return readFileSync(out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `text` spoken by espeak-ng, as its WAV file (22050 Hz, 16-bit mono). */
export function speak(text: string): Buffer {
  return tool('espeak-ng', ['--stdout', text], undefined, 'espeak-ng');
}

/** The samples of a 16-bit PCM mono WAV (what espeak-ng writes), as floats, and its rate. */
export function readWav(wav: Buffer): { samples: Float32Array; rate: number } {
  let offset = 12;
  let rate = 0;
  while (offset + 8 <= wav.length) {
    const id = wav.toString('ascii', offset, offset + 4);
    let size = wav.readUInt32LE(offset + 4);
    if (id === 'fmt ') rate = wav.readUInt32LE(offset + 12);
    if (id === 'data') {
      // espeak-ng writes to a pipe and cannot fill in the size: the data runs to the end.
      if (size === 0 || size > wav.length - offset - 8) size = wav.length - offset - 8;
      const n = Math.floor(size / 2);
      const samples = new Float32Array(n);
      for (let i = 0; i < n; i++) samples[i] = wav.readInt16LE(offset + 8 + 2 * i) / 32768;
      return { samples, rate };
    }
    offset += 8 + size + (size % 2);
  }
  throw new Error('readWav: no data chunk');
}

/** RMS level per 100 ms block, in thousandths (what the fake speech model reads out). */
export function envelope(samples: Float32Array, rate: number): number[] {
  const block = rate / 10;
  const out: number[] = [];
  for (let start = 0; start < samples.length; start += block) {
    const end = Math.min(samples.length, Math.floor(start + block));
    let sum = 0;
    for (let i = Math.floor(start); i < end; i++) sum += samples[i]! * samples[i]!;
    out.push(Math.round(Math.sqrt(sum / Math.max(1, end - Math.floor(start))) * 1000));
  }
  return out;
}

/** Pearson correlation of two series over their common length. */
export function correlation(a: number[], b: number[]): number {
  const n = Math.min(a.length, b.length);
  const ma = a.slice(0, n).reduce((s, x) => s + x, 0) / n;
  const mb = b.slice(0, n).reduce((s, x) => s + x, 0) / n;
  let num = 0;
  let da = 0;
  let db = 0;
  for (let i = 0; i < n; i++) {
    num += (a[i]! - ma) * (b[i]! - mb);
    da += (a[i]! - ma) ** 2;
    db += (b[i]! - mb) ** 2;
  }
  return num / Math.sqrt(da * db);
}

/** What ffprobe says of an encoded file (its first audio stream); `raw` names the demuxer of headerless samples. */
export function probe(bytes: Buffer, raw?: string[]): { codec: string; rate: number; channels: number } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'lia-audio-probe-'));
  try {
    const file = path.join(dir, 'audio');
    writeFileSync(file, bytes);
    const args = ['-v', 'error', ...(raw ?? []), '-show_entries', 'stream=codec_name,sample_rate,channels', '-of', 'json', file];
    const stream = (
      JSON.parse(tool('ffprobe', args, undefined, 'ffmpeg').toString()) as { streams: { codec_name: string; sample_rate: string; channels: number }[] }
    ).streams[0]!;
    return { codec: stream.codec_name, rate: Number(stream.sample_rate), channels: stream.channels };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Signed 16-bit little-endian samples as floats. */
export function fromPcm16(pcm: Buffer): Float32Array {
  const out = new Float32Array(Math.floor(pcm.length / 2));
  for (let i = 0; i < out.length; i++) out[i] = pcm.readInt16LE(2 * i) / 32768;
  return out;
}

/** The RMS level of `samples`. */
export function rms(samples: Float32Array): number {
  let sum = 0;
  for (const x of samples) sum += x * x;
  return Math.sqrt(sum / Math.max(1, samples.length));
}
