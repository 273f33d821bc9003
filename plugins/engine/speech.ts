/**
 * Text to speech on a loaded model: the request checked (the input, the speed, the format), the
 * voice picked among the model's (OpenAI's voice names map to them in turn), the input cut into
 * sentences (sentences.ts) and spoken one after another, each part handed to the ffmpeg encoder
 * (speech-encoder.ts) as soon as it is spoken, so the first encoded bytes leave while the rest
 * is still being spoken. A client that leaves stops the synthesis between parts and kills ffmpeg.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { InferenceSpeakRequest, LoadedModel, SpeechFormat, SpeechStream, SpeechUsage, SynthesizeResult } from './public.js';
import { unsupported } from './images.js';
import { splitSentences } from './sentences.js';
import { SPEECH_FORMATS, SPEECH_RATE, startEncoder, type SpeechEncoder } from './speech-encoder.js';

/**
 * OpenAI's built-in voices, in the order they map onto a model's voices: the i-th is the model's
 * voice i modulo their number (all of them the one voice of a single-speaker model).
 */
export const OPENAI_VOICES = ['alloy', 'ash', 'ballad', 'coral', 'echo', 'fable', 'onyx', 'nova', 'sage', 'shimmer', 'verse', 'marin', 'cedar'] as const;

/** Audio tokens counted per second of speech ({@link SpeechUsage.outputTokens}). */
export const AUDIO_TOKENS_PER_SECOND = 20;

/** What a speech request asks, checked. */
export interface SpeechJob {
  parts: string[];
  format: SpeechFormat;
  speed: number;
  voice?: string;
  instructions?: string;
}

/** Checks what needs no model: a 400 naming `input`, `speed` or `response_format`. */
export function planSpeech(req: InferenceSpeakRequest): SpeechJob {
  if (typeof req.input !== 'string') throw Errors.badRequest('input is required: the text to speak', { param: 'input' });
  const parts = splitSentences(req.input);
  if (parts.length === 0) throw Errors.badRequest('input is empty: there is no text to speak', { param: 'input' });
  const speed = req.speed ?? 1;
  if (!Number.isFinite(speed) || speed < 0.25 || speed > 4) throw Errors.badRequest('speed must be a number from 0.25 to 4', { param: 'speed' });
  const format = req.format ?? 'mp3';
  if (!Object.hasOwn(SPEECH_FORMATS, format)) {
    throw Errors.badRequest(`response_format must be one of ${Object.keys(SPEECH_FORMATS).join(', ')}`, { param: 'response_format' });
  }
  return {
    parts,
    format,
    speed,
    ...(req.voice ? { voice: req.voice } : {}),
    ...(req.instructions ? { instructions: req.instructions } : {}),
  };
}

/** The model's voice for `asked`: its own name, else an OpenAI voice mapped onto it, else a 400 naming `voice`. */
export function pickVoice(voices: readonly string[], asked: string | undefined): string {
  if (!asked) return voices[0]!;
  if (voices.includes(asked)) return asked;
  const index = (OPENAI_VOICES as readonly string[]).indexOf(asked.toLowerCase());
  if (index >= 0) return voices[index % voices.length]!;
  throw Errors.badRequest(`voice "${asked}" is not one of this model's voices (${voices.join(', ')}) nor one of OpenAI's (${OPENAI_VOICES.join(', ')})`, {
    param: 'voice',
  });
}

/** The leased model and what `startSpeech` tells when the speech is over. */
export interface SpeechTarget {
  /** The store's name (what the answer reports) and the name asked (what a 400 names). */
  name: string;
  asked: string;
  model: LoadedModel;
  /** The ffmpeg to run; `ffmpeg` on the PATH by default. */
  ffmpeg?: string;
  /** Called once when the speech is over (ended, failed, left): releases the model, counts usage. */
  finish(usage: SpeechUsage): void;
}

/**
 * Speaks `job` on `target.model`. Resolves once the first encoded bytes are in hand; every
 * failure before them rejects with its own status (and finishes the target).
 */
export async function startSpeech(target: SpeechTarget, job: SpeechJob, signal: AbortSignal): Promise<SpeechStream> {
  const { model } = target;
  const stop = new AbortController();
  const abort = AbortSignal.any([signal, stop.signal]);
  let inputTokens = 0;
  let samples = 0;
  let rate = 0;
  const usage = (): SpeechUsage => {
    const seconds = rate > 0 ? samples / rate : 0;
    return { inputTokens, outputTokens: Math.ceil(seconds * AUDIO_TOKENS_PER_SECOND), seconds: Math.round(seconds * 1000) / 1000 };
  };
  let encoder: SpeechEncoder | undefined;
  let over = false;
  const close = (reason: Error) => {
    if (over) return;
    over = true;
    signal.removeEventListener('abort', onAbort);
    stop.abort(reason);
    encoder?.kill(reason);
    target.finish(usage());
  };
  const onAbort = () => close(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
  signal.addEventListener('abort', onAbort, { once: true });
  const failBefore = (err: unknown): never => {
    close(err instanceof Error ? err : new Error(String(err)));
    throw err;
  };

  let voice: string;
  let first: SynthesizeResult;
  try {
    if (!model.synthesize || !model.speech?.voices.length) throw unsupported(target.asked, 'speech');
    voice = pickVoice(model.speech.voices, job.voice);
    signal.throwIfAborted();
    first = await speak(job.parts[0]!);
  } catch (err) {
    return failBefore(err);
  }

  async function speak(text: string): Promise<SynthesizeResult> {
    const result = await model.synthesize!({ text, voice, ...(job.instructions ? { instructions: job.instructions } : {}) }, abort);
    if (rate === 0) rate = result.sampleRate;
    else if (result.sampleRate !== rate) throw Errors.engineFailed(`model "${target.name}" spoke at ${result.sampleRate} Hz after ${rate} Hz`);
    inputTokens += result.tokens;
    samples += result.samples.length;
    return result;
  }

  const running = startEncoder(job.format, rate, job.speed, target.ffmpeg);
  encoder = running;
  // The rest is spoken while ffmpeg encodes what came before, each part written as it is done.
  const feeding = (async () => {
    await running.write(first.samples);
    for (const part of job.parts.slice(1)) {
      abort.throwIfAborted();
      await running.write((await speak(part)).samples);
    }
    running.end();
  })();
  feeding.catch((err: unknown) => running.kill(err instanceof Error ? err : new Error(String(err))));

  const bytes = running.output[Symbol.asyncIterator]();
  let head: IteratorResult<Buffer>;
  try {
    head = await bytes.next();
  } catch (err) {
    return failBefore(err);
  }
  async function* audio(): AsyncGenerator<Uint8Array> {
    try {
      if (!head.done) yield head.value;
      for (let next = await bytes.next(); !next.done; next = await bytes.next()) yield next.value;
      await feeding;
    } catch (err) {
      // A client that left ends its answer quietly: nobody reads the error.
      if (!signal.aborted) throw err;
    } finally {
      await bytes.return?.();
      close(new Error('the speech is over'));
    }
  }
  return {
    model: target.name,
    voice,
    format: job.format,
    contentType: SPEECH_FORMATS[job.format].contentType,
    sampleRate: SPEECH_RATE,
    audio: audio(),
    usage,
  };
}
