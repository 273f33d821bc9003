/**
 * Speech in the chat: the voice settings (kept in this browser's `localStorage`, key
 * `lia.voice`), recording from the microphone with `getUserMedia` and `MediaRecorder`, the
 * recording sent to `/v1/audio/transcriptions`, and an answer read out by `/v1/audio/speech`.
 * The models come from the same list as the chat picker: those whose capabilities include
 * `transcription` or `speech`.
 */
import { request } from './api';
import { renderMarkdown } from './markdown';
import type { ModelInfo } from './models';

export interface VoiceSettings {
  /** The model that turns a recording into text; empty: the first one installed. */
  transcriptionModel: string;
  /** The model that reads answers out; empty: the first one installed. */
  speechModel: string;
  /** The voice `/v1/audio/speech` is asked for (one of the speech model's, when it lists them). */
  voice: string;
  /** Send the transcribed text at once instead of leaving it in the message box. */
  autoSend: boolean;
}

const STORE = 'lia.voice';

/** The voice asked for unless the user names another (OpenAI's first built-in voice). */
export const DEFAULT_VOICE = 'alloy';

/** The most characters one `/v1/audio/speech` request takes (OpenAI's limit); longer answers go in parts. */
export const SPEECH_INPUT_MAX = 4096;

export function loadVoiceSettings(): VoiceSettings {
  const base: VoiceSettings = { transcriptionModel: '', speechModel: '', voice: DEFAULT_VOICE, autoSend: false };
  try {
    const raw = JSON.parse(localStorage.getItem(STORE) ?? '{}') as Partial<VoiceSettings>;
    return {
      transcriptionModel: typeof raw.transcriptionModel === 'string' ? raw.transcriptionModel : base.transcriptionModel,
      speechModel: typeof raw.speechModel === 'string' ? raw.speechModel : base.speechModel,
      voice: typeof raw.voice === 'string' ? raw.voice : base.voice,
      autoSend: raw.autoSend === true,
    };
  } catch {
    return base;
  }
}

export function saveVoiceSettings(s: VoiceSettings): void {
  localStorage.setItem(STORE, JSON.stringify(s));
}

/**
 * The installed models with `capability`. A model that hears (`audio`, a GGUF with an audio
 * projector) transcribes too, so it counts for `transcription`.
 */
export function modelsWith(models: ModelInfo[], capability: 'transcription' | 'speech'): ModelInfo[] {
  return models.filter((m) => m.capabilities.includes(capability) || (capability === 'transcription' && m.capabilities.includes('audio')));
}

/** The chosen model when it is among `candidates`, else the first of them; empty when there is none. */
export function pickModel(chosen: string, candidates: ModelInfo[]): string {
  return candidates.some((m) => m.name === chosen) ? chosen : (candidates[0]?.name ?? '');
}

/**
 * The voice to ask for: the chosen one when the model lists it (or lists none: then any name,
 * OpenAI's included, is the server's to map), else the model's first.
 */
export function pickVoice(chosen: string, voices: string[]): string {
  const name = chosen.trim() || DEFAULT_VOICE;
  return voices.length === 0 || voices.includes(name) ? name : voices[0]!;
}

/** What the browser's refusal to record means, as a sentence a user can act on. */
export function microphoneError(err: unknown): string {
  const name = (err as { name?: string }).name;
  if (name === 'NotAllowedError' || name === 'SecurityError')
    return 'The browser did not let this page use the microphone. Allow the microphone for this site (in the address bar or the site settings) and try again.';
  if (name === 'NotFoundError' || name === 'OverconstrainedError') return 'No microphone was found. Connect one and try again.';
  if (name === 'NotReadableError' || name === 'AbortError') return 'The microphone could not be started: another program may be using it.';
  return `The microphone could not be started: ${(err as Error).message ?? String(err)}`;
}

/** Containers MediaRecorder may write, best first, and the file name each is sent under. */
const CONTAINERS: [mime: string, file: string][] = [
  ['audio/webm;codecs=opus', 'speech.webm'],
  ['audio/ogg;codecs=opus', 'speech.ogg'],
  ['audio/webm', 'speech.webm'],
  ['audio/mp4', 'speech.m4a'],
];

/** A recording in progress; `stop()` ends it and resolves to the audio and its file name. */
export interface Recording {
  stop(): Promise<{ audio: Blob; file: string }>;
  /** Ends it and releases the microphone, keeping nothing. */
  cancel(): void;
}

/**
 * Opens the microphone and starts recording (webm/opus where the browser writes it). Throws a
 * sentence for the user when the browser offers no microphone or refuses it.
 */
export async function startRecording(): Promise<Recording> {
  if (!navigator.mediaDevices?.getUserMedia)
    throw new Error('This browser offers no microphone to this page (it needs the page over HTTPS and a browser that records audio).');
  if (typeof MediaRecorder === 'undefined') throw new Error('This browser cannot record audio (it has no MediaRecorder).');
  let stream: MediaStream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (err) {
    throw new Error(microphoneError(err));
  }
  const release = () => stream.getTracks().forEach((track) => track.stop());
  const found = CONTAINERS.find(([mime]) => MediaRecorder.isTypeSupported(mime));
  let recorder: MediaRecorder;
  try {
    recorder = new MediaRecorder(stream, found ? { mimeType: found[0] } : {});
  } catch (err) {
    release();
    throw new Error(`This browser cannot record audio: ${(err as Error).message}`);
  }
  const chunks: Blob[] = [];
  recorder.ondataavailable = (e) => {
    if (e.data.size > 0) chunks.push(e.data);
  };
  const stopped = new Promise<void>((resolve) => (recorder.onstop = () => resolve()));
  recorder.start();
  return {
    async stop() {
      if (recorder.state !== 'inactive') recorder.stop();
      await stopped;
      release();
      const type = recorder.mimeType || found?.[0] || 'audio/webm';
      const file = CONTAINERS.find(([mime]) => type.startsWith(mime.split(';')[0]!))?.[1] ?? 'speech.webm';
      return { audio: new Blob(chunks, { type }), file };
    },
    cancel() {
      if (recorder.state !== 'inactive') recorder.stop();
      release();
    },
  };
}

/** The text of a recording, from `/v1/audio/transcriptions` (multipart, as OpenAI's clients send it). */
export async function transcribe(audio: Blob, file: string, model: string, signal?: AbortSignal): Promise<string> {
  const form = new FormData();
  form.append('file', audio, file);
  form.append('model', model);
  form.append('response_format', 'json');
  const res = await request('/v1/audio/transcriptions', { body: form, signal });
  const body = (await res.json()) as { text?: unknown };
  return typeof body.text === 'string' ? body.text.trim() : '';
}

/** An answer as the words to say: the Markdown rendered and its text taken, so no `**` or `#` is read out. */
export function speakableText(markdown: string): string {
  const doc = new DOMParser().parseFromString(renderMarkdown(markdown), 'text/html');
  return (doc.body.textContent ?? '')
    .replace(/[ \t]+/g, ' ')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

/** Where to end a part taken from the start of `head`: after its last paragraph, sentence or word. */
function cutIndex(head: string): number {
  const last = (seps: string[]) => Math.max(...seps.map((sep) => (head.includes(sep) ? head.lastIndexOf(sep) + sep.length : 0)));
  for (const seps of [['\n\n'], ['. ', '! ', '? ', '\n'], [' ']]) {
    const at = last(seps);
    // A cut in the first quarter would make many small parts: look for a smaller boundary instead.
    if (at > head.length / 4) return at;
  }
  return head.length;
}

/** `text` in parts of at most `max` characters, cut at paragraph, then sentence, then word ends. */
export function speechParts(text: string, max = SPEECH_INPUT_MAX): string[] {
  const parts: string[] = [];
  let rest = text.trim();
  while (rest.length > max) {
    const at = cutIndex(rest.slice(0, max));
    parts.push(rest.slice(0, at).trim());
    rest = rest.slice(at).trim();
  }
  if (rest) parts.push(rest);
  return parts;
}

/** One part of an answer as MP3, from `/v1/audio/speech`. */
export async function synthesize(input: string, model: string, voice: string, signal?: AbortSignal): Promise<Blob> {
  const res = await request('/v1/audio/speech', { body: { model, input, voice, response_format: 'mp3' }, signal });
  return res.blob();
}
