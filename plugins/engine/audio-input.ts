/**
 * Audio a prompt carries for a model that hears (the `audio` capability: a GGUF with an audio
 * encoder in its projector, as llama.cpp's mtmd loads it). Each clip is base64 text in any
 * container ffmpeg reads for a transcription (audio.ts), decoded and resampled there, and handed
 * to the backend as one 16 kHz mono 16-bit PCM WAV: the one form every audio encoder llama.cpp
 * has takes without a conversion of its own, whatever the client recorded. A clip that is not
 * base64, is empty, is not audio or is longer than the engine's `maxAudioSeconds` is a 400 naming
 * the field, before a model is loaded for it.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import { wavFile } from 'lia/utils';
import type { ResolvedModel } from 'lia/model-store';
import { decodeWindows, type DecodeLimits } from './audio.js';
import { isBase64 } from './image-check.js';
import { unsupported } from './images.js';

/** The rate clips are resampled to: what Whisper-style audio encoders hear. */
export const AUDIO_INPUT_RATE = 16_000;

/**
 * A prompt's audio clips, checked and decoded, as WAV base64 for the backend. The model must
 * have the `audio` capability (else a 400 naming `model`, before anything is decoded).
 */
export async function checkAudio(
  model: ResolvedModel,
  asked: string,
  clips: readonly string[],
  limits: DecodeLimits,
  param: string,
  signal?: AbortSignal,
): Promise<string[]> {
  if (clips.length === 0) return [];
  if (!model.capabilities.includes('audio')) throw unsupported(asked, 'audio');
  const out: string[] = [];
  for (const clip of clips) out.push(wavFile(await decodeClip(clip, limits, param, signal), AUDIO_INPUT_RATE).toString('base64'));
  return out;
}

/** One clip's samples at {@link AUDIO_INPUT_RATE}. */
async function decodeClip(clip: unknown, limits: DecodeLimits, param: string, signal?: AbortSignal): Promise<Float32Array> {
  if (typeof clip !== 'string') throw Errors.badRequest('an audio clip must be base64 text', { param });
  const text = clip.replace(/^data:[^,]*;base64,/, '').replace(/\s+/g, '');
  if (text.length === 0) throw Errors.badRequest('an audio clip is empty', { param });
  if (!isBase64(text)) throw Errors.badRequest('an audio clip is not valid base64 data', { param });
  // One window as long as the limit: the clip is decoded whole (a longer one is a 400 first), so
  // there is exactly one window.
  const window = Math.ceil(limits.maxSeconds * AUDIO_INPUT_RATE) + 1;
  let samples: Float32Array = new Float32Array(0);
  for await (const w of decodeWindows(Buffer.from(text, 'base64'), AUDIO_INPUT_RATE, window, limits, signal, param)) samples = w.samples;
  return samples;
}

/**
 * Whether base64 `data` starts as an audio file does: RIFF/WAVE, FLAC, Ogg, an MP3 (its ID3 tag
 * or an MPEG audio frame), raw AAC (ADTS), an MP4/M4A (`ftyp`), WebM/Matroska (EBML) or MPEG
 * program stream file. Ollama takes audio
 * in a message's `images` and tells it from an image by such a signature (RIFF/WAVE only); no
 * image format LIA takes starts like any of these.
 */
export function looksLikeAudio(data: string): boolean {
  const head = Buffer.from(data.replace(/^data:[^,]*;base64,/, '').slice(0, 24), 'base64');
  const ascii = (from: number, to: number) => head.toString('latin1', from, to);
  if (ascii(0, 4) === 'RIFF' && ascii(8, 12) === 'WAVE') return true;
  if (['fLaC', 'OggS'].includes(ascii(0, 4)) || ascii(0, 3) === 'ID3' || ascii(4, 8) === 'ftyp') return true;
  // EBML (WebM, Matroska); an MPEG program stream's pack header (`.mpeg`, `.mpg`).
  if (head.length >= 4 && (head.readUInt32BE(0) === 0x1a45dfa3 || head.readUInt32BE(0) === 0x000001ba)) return true;
  if (head.length < 2 || head[0] !== 0xff) return false;
  // An MPEG audio frame (11 sync bits, then a layer that is not the reserved one), or raw AAC's ADTS.
  return ((head[1]! & 0xe0) === 0xe0 && (head[1]! & 0x06) !== 0) || (head[1]! & 0xf6) === 0xf0;
}
