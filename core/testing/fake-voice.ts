/**
 * The fake backend's text-to-speech model (`createVoiceModel` from `lia/testing`; its text is
 * {@link VOICE_MARK} and its voice names): the `speech` capability only. It speaks each
 * character of a sentence as 10 ms of a 400 Hz tone at 16 kHz, louder for each later voice
 * (amplitude 0.1 × (voice index + 1)), so a test knows how long and how loud the audio is; a
 * token per character. {@link holdSpeech} makes it wait before speaking any sentence that holds
 * the word `HOLD`, until the test lets go: a test can read the first sentence's audio while a
 * later one is certainly not spoken yet.
 *
 * @module
 */
import type { LoadedModel, SynthesizeParams, SynthesizeResult } from 'lia/engine';
import { Errors } from '../errors.js';

/** The first word of a fake voice model's text; the words after it are its voices (`default` when none). */
export const VOICE_MARK = '#fake-voice';

/** The sample rate it speaks at. */
const RATE = 16000;

/** A fake voice model's voices, or null for another fake model. */
export function voiceNames(text: string): string[] | null {
  if (!text.startsWith(VOICE_MARK)) return null;
  const names = text.slice(VOICE_MARK.length).split(/\s+/).filter(Boolean);
  return names.length > 0 ? names : ['default'];
}

let held: { until: Promise<void>; release: () => void } | null = null;

/**
 * Holds every sentence with the word `HOLD` (in any fake voice model) until the returned
 * function is called; calling it again is a no-op.
 */
export function holdSpeech(): () => void {
  let release = () => {};
  const until = new Promise<void>((resolve) => (release = resolve));
  const hold = { until, release: () => release() };
  held = hold;
  return () => {
    hold.release();
    if (held === hold) held = null;
  };
}

/** `text` spoken: 160 samples of tone per character. */
function tones(text: string, amplitude: number): Float32Array {
  const samples = new Float32Array(text.length * 160);
  for (let i = 0; i < samples.length; i++) samples[i] = amplitude * Math.sin((2 * Math.PI * 400 * i) / RATE);
  return samples;
}

/** The loaded fake voice model. */
export function fakeVoiceModel(voices: string[], sizeBytes: number): LoadedModel {
  const refuse = () => {
    throw Errors.badRequest('a fake voice model only speaks');
  };
  return {
    capabilities: ['speech'],
    contextLength: 0,
    sizeBytes,
    vramBytes: 0,
    speech: { voices },
    async synthesize(params: SynthesizeParams, signal: AbortSignal): Promise<SynthesizeResult> {
      const hold = held;
      if (hold && /\bHOLD\b/.test(params.text))
        await Promise.race([hold.until, new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
      signal.throwIfAborted();
      const voice = voices.indexOf(params.voice);
      if (voice < 0) throw Errors.badRequest(`voice "${params.voice}" is not one of ${voices.join(', ')}`, { param: 'voice' });
      return { samples: tones(params.text, 0.1 * (voice + 1)), sampleRate: RATE, tokens: params.text.length };
    },
    generate: refuse,
    chat: refuse,
    embed: async () => refuse(),
    unload: async () => undefined,
  };
}
