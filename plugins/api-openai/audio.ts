/**
 * OpenAI's audio transcription and translation wire format: the multipart fields the `openai`
 * SDKs send (`file`, `model`, `language`, `prompt`, `temperature`, `response_format`,
 * `timestamp_granularities[]`, `stream`), read into an {@link AudioRequest}, and pure renderings
 * of the engine's {@link TranscriptionResponse} as each `response_format` asks (`json`, `text`,
 * `srt`, `vtt`, `verbose_json`) and as stream events (`transcript.text.delta`,
 * `transcript.text.done`). `routes/audio.ts` serves them.
 *
 * Fields the specification defines that LIA cannot honour (`include[]` of logprobs,
 * `chunking_strategy`, the speaker fields) and fields newer than it are accepted and ignored,
 * as the request policy of docs/compatibility.md says; a wrong value of a known field is a 400
 * naming it.
 *
 * @module
 */
import { deflateSync } from 'node:zlib';
import { Errors } from 'lia/plugin';
import type { TranscriptionResponse, TranscriptSegment } from 'lia/engine';

export const RESPONSE_FORMATS = ['json', 'text', 'srt', 'vtt', 'verbose_json'] as const;
export type AudioResponseFormat = (typeof RESPONSE_FORMATS)[number];

/** What a client asked, from the multipart fields. */
export interface AudioRequest {
  model: string;
  file: Uint8Array;
  language?: string;
  prompt?: string;
  temperature?: number;
  responseFormat: AudioResponseFormat;
  /** `timestamp_granularities[]`; `segment` when none is given. */
  granularities: Set<'segment' | 'word'>;
  stream: boolean;
  /** Fields accepted without effect, for the debug line. */
  ignored: string[];
}

/** The fields this route reads, by their wire names (an array field with and without `[]`). */
const KNOWN = new Set(['model', 'language', 'prompt', 'temperature', 'response_format', 'stream', 'timestamp_granularities']);

/**
 * The request from its text fields (a field sent twice keeps its last value, but arrays keep
 * all) and the file. `task` is the route's: translations take no `language`.
 */
export function readAudioFields(fields: [string, string][], file: Uint8Array | undefined, task: 'transcribe' | 'translate'): AudioRequest {
  const one = new Map<string, string>();
  const granularities = new Set<'segment' | 'word'>();
  const ignored: string[] = [];
  for (const [rawName, value] of fields) {
    const name = rawName.endsWith('[]') ? rawName.slice(0, -2) : rawName;
    if (name === 'timestamp_granularities') {
      if (value !== 'segment' && value !== 'word') {
        throw Errors.badRequest(`timestamp_granularities[] must be "segment" or "word", not ${JSON.stringify(value)}`, { param: 'timestamp_granularities' });
      }
      granularities.add(value);
    } else if (KNOWN.has(name)) one.set(name, value);
    else ignored.push(rawName);
  }
  const model = one.get('model');
  if (!model) throw Errors.badRequest('model is required', { param: 'model' });
  if (!file) throw Errors.badRequest('file is required: the audio, as a multipart file field', { param: 'file' });
  const format = one.get('response_format') ?? 'json';
  if (!(RESPONSE_FORMATS as readonly string[]).includes(format)) {
    throw Errors.badRequest(`response_format must be one of ${RESPONSE_FORMATS.join(', ')}`, { param: 'response_format' });
  }
  const out: AudioRequest = {
    model,
    file,
    responseFormat: format as AudioResponseFormat,
    granularities: granularities.size > 0 ? granularities : new Set(['segment']),
    stream: booleanField(one.get('stream'), 'stream'),
    ignored,
  };
  const temperature = one.get('temperature');
  if (temperature !== undefined && temperature !== '') {
    const t = Number(temperature);
    if (!Number.isFinite(t) || t < 0 || t > 1) throw Errors.badRequest('temperature must be a number from 0 to 1', { param: 'temperature' });
    out.temperature = t;
  }
  const language = one.get('language');
  if (language) {
    if (task === 'translate') ignored.push('language');
    else if (!/^[a-zA-Z]{2,3}(-[a-zA-Z0-9]+)?$/.test(language)) {
      throw Errors.badRequest('language must be an ISO-639-1 code such as "en"', { param: 'language' });
    } else out.language = language.toLowerCase();
  }
  const prompt = one.get('prompt');
  if (prompt) out.prompt = prompt;
  if (out.stream && (format === 'srt' || format === 'vtt' || format === 'verbose_json')) {
    throw Errors.badRequest(`stream is not available with response_format "${format}" (use json or text)`, { param: 'stream' });
  }
  return out;
}

function booleanField(value: string | undefined, param: string): boolean {
  if (value === undefined || value === '' || value === 'false') return false;
  if (value === 'true') return true;
  throw Errors.badRequest(`${param} must be true or false`, { param });
}

/** Whisper's language names, which `verbose_json` reports (`"english"`), for the codes LIA knows. */
const LANGUAGES: Record<string, string> = {
  en: 'english',
  de: 'german',
  fr: 'french',
  es: 'spanish',
  it: 'italian',
  pt: 'portuguese',
  nl: 'dutch',
  pl: 'polish',
  ru: 'russian',
  uk: 'ukrainian',
  zh: 'chinese',
  ja: 'japanese',
  ko: 'korean',
  ar: 'arabic',
  hi: 'hindi',
  tr: 'turkish',
  sv: 'swedish',
  da: 'danish',
  fi: 'finnish',
  no: 'norwegian',
  cs: 'czech',
  el: 'greek',
};

/** The language as `verbose_json` names it: Whisper's name where known, else the code. */
export function languageName(code: string): string {
  return LANGUAGES[code.toLowerCase()] ?? code;
}

/** The usage OpenAI reports for a duration-billed model (`whisper-1`). */
function usage(result: TranscriptionResponse) {
  return { type: 'duration' as const, seconds: Math.ceil(result.duration) };
}

/** The answer's body and content type for `format`. */
export function renderTranscription(result: TranscriptionResponse, request: AudioRequest): { type: string; body: string | object } {
  switch (request.responseFormat) {
    case 'text':
      return { type: 'text/plain; charset=utf-8', body: `${result.text}\n` };
    case 'srt':
      return { type: 'text/plain; charset=utf-8', body: srt(result.segments) };
    case 'vtt':
      return { type: 'text/vtt; charset=utf-8', body: vtt(result.segments) };
    case 'verbose_json':
      return {
        type: 'application/json; charset=utf-8',
        body: {
          task: result.task,
          language: languageName(result.language),
          duration: result.duration,
          text: result.text,
          ...(request.granularities.has('segment') ? { segments: result.segments.map(verboseSegment) } : {}),
          ...(request.granularities.has('word') ? { words: result.words } : {}),
          usage: usage(result),
        },
      };
    default:
      return { type: 'application/json; charset=utf-8', body: { text: result.text, usage: usage(result) } };
  }
}

function verboseSegment(s: TranscriptSegment) {
  return {
    id: s.id,
    seek: s.seek,
    start: s.start,
    end: s.end,
    text: s.text,
    tokens: s.tokens,
    temperature: 0,
    avg_logprob: s.avgLogprob,
    compression_ratio: compressionRatio(s.text),
    no_speech_prob: s.noSpeechProb,
  };
}

/** Whisper's repetition measure: the text's bytes over their zlib-compressed bytes. */
function compressionRatio(text: string): number {
  if (!text) return 0;
  const bytes = Buffer.from(text, 'utf8');
  return Math.round((bytes.length / deflateSync(bytes).length) * 1000) / 1000;
}

/** `HH:MM:SS,mmm` (SubRip) or `HH:MM:SS.mmm` (WebVTT). */
export function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = Math.floor((ms % 60_000) / 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(h)}:${pad(m)}:${pad(s)}${separator}${pad(ms % 1000, 3)}`;
}

/** SubRip: numbered cues from 1. */
export function srt(segments: TranscriptSegment[]): string {
  return segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ',')} --> ${timestamp(s.end, ',')}\n${s.text}\n`).join('\n');
}

/** WebVTT: the header, then one cue per segment. */
export function vtt(segments: TranscriptSegment[]): string {
  return `WEBVTT\n\n${segments.map((s) => `${timestamp(s.start, '.')} --> ${timestamp(s.end, '.')}\n${s.text}\n`).join('\n')}`;
}

/** A stream's delta event: a segment's text, a space before every segment but the first. */
export function deltaEvent(segment: TranscriptSegment) {
  return { type: 'transcript.text.delta' as const, delta: segment.id === 0 ? segment.text : ` ${segment.text}`, segment_id: String(segment.id) };
}

/** A stream's last event: the whole text. */
export function doneEvent(result: TranscriptionResponse) {
  return { type: 'transcript.text.done' as const, text: result.text, usage: usage(result) };
}
