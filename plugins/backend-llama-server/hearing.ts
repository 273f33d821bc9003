/**
 * Transcription on a model that hears: a GGUF language model whose projector has an audio encoder
 * (the `audio` capability), which llama-server serves with `--mmproj`. Each window the engine cuts
 * ({@link HEARING}) is asked of the model as one chat turn in its own template: an instruction,
 * then the clip as a 16 kHz WAV. The answer is the window's text. This is how llama-server's own
 * `/v1/audio/transcriptions` asks such a model; LIA asks on the chat path instead, so that a
 * transcription runs on a slot like any chat (placement, cancellation, metrics), and keeps its
 * own formats, windows and times.
 *
 * The instruction names the language when the client gives one; `translate` asks for English.
 * The earlier text (`prompt`: the client's, then the previous window's) is not sent: a model that
 * follows instructions takes it for more to transcribe, and it would crowd the context. Decoding
 * is greedy unless the client sets a temperature. Such a model cannot time its words,
 * so each window is one segment; it reports no language of its own.
 *
 * @module
 */
import type { AudioInput, ChatParams, GenerationEvent, TranscribeParams, TranscribeResult } from 'lia/engine';
import { wavFile } from 'lia/utils';

/**
 * What a model that hears is sent: 16 kHz audio, 29.5 s at a time. llama.cpp pads a clip with 30 s
 * of silence and encodes it in whole 30 s windows (a Whisper encoder's), so a clip under 29.99 s is
 * one encoder window and one window's tokens.
 */
export const HEARING: AudioInput = { sampleRate: 16_000, windowSeconds: 29.5 };

/** Tokens one window's text may take: Whisper's own bound for 30 s of speech. */
const MAX_TOKENS = 448;

/** The chat a window is asked as. */
export function hearingChat(p: TranscribeParams): ChatParams {
  const clip = wavFile(p.samples, HEARING.sampleRate).toString('base64');
  const language = p.language ? ` The speech is in the language with ISO-639-1 code "${p.language}".` : '';
  const instruction =
    p.task === 'translate'
      ? `Translate the speech in this audio into English.${language} Answer with the English text only.`
      : `Transcribe this audio to text, word for word.${language} Answer with the transcript only.`;
  return {
    messages: [{ role: 'user', content: instruction, audio: [clip] }],
    options: { temperature: p.temperature ?? 0, num_predict: MAX_TOKENS },
    logprobs: 0,
  };
}

/** The window's text from the chat's events; `tokenIds` counts it in the model's tokens. */
export async function heard(
  events: AsyncIterable<GenerationEvent>,
  tokenIds: (text: string) => Promise<number[]>,
  p: TranscribeParams,
): Promise<TranscribeResult> {
  let text = '';
  let logprob = 0;
  let counted = 0;
  for await (const e of events) {
    if (e.type !== 'token') continue;
    text += e.text;
    for (const l of e.logprobs ?? []) {
      logprob += l.logprob;
      counted++;
    }
  }
  text = text.trim();
  return {
    text,
    words: [],
    tokens: text ? await tokenIds(text) : [],
    avgLogprob: counted > 0 ? logprob / counted : 0,
    noSpeechProb: text ? 0 : 1,
    ...(p.language ? { language: p.language } : {}),
  };
}
