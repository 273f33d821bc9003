/**
 * OpenAI's text-to-speech wire format (`POST /v1/audio/speech`): the JSON body as the `openai`
 * SDKs send it (`model`, `input` of at most 4096 characters, `voice`, `instructions`, `speed`,
 * `response_format`, `stream_format`), read into the engine's {@link InferenceSpeakRequest}, and
 * the events of `stream_format: "sse"` (`speech.audio.delta` with base64 audio, then
 * `speech.audio.done` with the usage). `routes/speech.ts` serves them. Unknown fields are
 * accepted and ignored, as the request policy of docs/compatibility.md says.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import type { InferenceSpeakRequest, SpeechUsage } from 'lia/engine';
import { Model, open, Opt, OptOneOf } from './translate/schemas.js';

/** OpenAI's limit on `input`, in characters. */
export const MAX_SPEECH_INPUT = 4096;

export const SPEECH_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;

export const SpeechBody = Type.Object(
  {
    model: Model,
    input: Type.String({ maxLength: MAX_SPEECH_INPUT }),
    /** A voice name, or a custom voice as `{ "id": ... }` (its id is taken as a name). */
    voice: Type.Optional(Type.Union([Type.String({ maxLength: 256 }), Type.Object({ id: Type.String({ minLength: 1, maxLength: 256 }) }, open), Type.Null()])),
    instructions: Opt(Type.String({ maxLength: MAX_SPEECH_INPUT })),
    speed: Opt(Type.Number({ minimum: 0.25, maximum: 4 })),
    response_format: OptOneOf(SPEECH_FORMATS),
    stream_format: OptOneOf(['audio', 'sse'] as const),
  },
  open,
);
export type SpeechBody = Static<typeof SpeechBody>;

/** The engine's request for `body`, the model name already resolved. */
export function translateSpeechRequest(body: SpeechBody, model: string): InferenceSpeakRequest {
  const voice = typeof body.voice === 'string' ? body.voice : body.voice?.id;
  return {
    model,
    input: body.input,
    format: body.response_format ?? 'mp3',
    ...(voice ? { voice } : {}),
    ...(body.instructions ? { instructions: body.instructions } : {}),
    ...(body.speed !== undefined && body.speed !== null ? { speed: body.speed } : {}),
  };
}

/** One piece of the encoded audio, as an SSE event. */
export function speechDelta(audio: Uint8Array) {
  return { type: 'speech.audio.delta' as const, audio: Buffer.from(audio.buffer, audio.byteOffset, audio.byteLength).toString('base64') };
}

/** The stream's last event, with the usage. */
export function speechDone(usage: SpeechUsage) {
  return {
    type: 'speech.audio.done' as const,
    usage: { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens },
  };
}
