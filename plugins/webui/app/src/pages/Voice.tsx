/**
 * The chat's voice: dictation (record, stop, the text into the message box or sent at once),
 * read-aloud of an answer (a second click stops it) and their settings. Each is a hook whose
 * state the chat page renders, so an error stays on the page after the button that caused it
 * is gone (the transcription model deleted, say).
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from '../api';
import type { ModelInfo } from '../models';
import { DEFAULT_VOICE, modelsWith, type Recording, speakableText, speechParts, startRecording, synthesize, transcribe, type VoiceSettings } from '../voice';

export type DictationState = 'idle' | 'starting' | 'recording' | 'transcribing';

export interface Dictation {
  state: DictationState;
  /** Whole seconds recorded so far. */
  seconds: number;
  error: string | null;
  start(): void;
  stop(): void;
}

function why(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Recording with `model` (empty: none installed). `onText` gets the transcript; `onModelGone`
 * is called when the server no longer knows the model (so the page can reload its list).
 */
export function useDictation(model: string, onText: (text: string) => void, onModelGone: () => void): Dictation {
  const [state, setState] = useState<DictationState>('idle');
  const [seconds, setSeconds] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const recording = useRef<Recording | null>(null);
  const controller = useRef<AbortController | null>(null);
  const callbacks = useRef({ onText, onModelGone });
  callbacks.current = { onText, onModelGone };

  useEffect(() => {
    if (state !== 'recording') return;
    const started = Date.now();
    setSeconds(0);
    const timer = setInterval(() => setSeconds(Math.floor((Date.now() - started) / 1000)), 250);
    return () => clearInterval(timer);
  }, [state]);

  // Leaving the page ends a recording and drops a transcription in flight.
  useEffect(
    () => () => {
      recording.current?.cancel();
      controller.current?.abort();
    },
    [],
  );

  const start = async () => {
    if (state !== 'idle') return;
    setError(null);
    if (!model) {
      setError('No model with the transcription capability is installed: create one (see the audio documentation) to speak your messages.');
      return;
    }
    setState('starting');
    try {
      recording.current = await startRecording();
      setState('recording');
    } catch (err) {
      setError(why(err));
      setState('idle');
    }
  };

  const stop = async () => {
    const rec = recording.current;
    if (state !== 'recording' || !rec) return;
    recording.current = null;
    setState('transcribing');
    const abort = new AbortController();
    controller.current = abort;
    try {
      const { audio, file } = await rec.stop();
      if (audio.size === 0) throw new Error('Nothing was recorded: check that the microphone is not muted.');
      const text = await transcribe(audio, file, model, abort.signal);
      if (!text) throw new Error('Nothing was heard in the recording.');
      callbacks.current.onText(text);
    } catch (err) {
      if ((err as Error).name === 'AbortError') return;
      if (err instanceof ApiError && err.status === 404) callbacks.current.onModelGone();
      setError(err instanceof ApiError ? `The transcription failed: ${err.message}` : why(err));
    } finally {
      controller.current = null;
      setState('idle');
    }
  };

  return { state, seconds, error, start: () => void start(), stop: () => void stop() };
}

export interface ReadAloud {
  /** The answer being read (its key), and whether its audio is still being made. */
  active: { key: string; phase: 'loading' | 'playing' } | null;
  error: { key: string; message: string } | null;
  /** Reads the answer `key` aloud, or stops it when it is the one being read. */
  toggle(key: string, markdown: string): void;
  /** The element that plays the audio: render it once, as `<audio ref={audioRef} />`. */
  audioRef: { current: HTMLAudioElement | null };
}

/** Resolves when `audio` ends or `signal` aborts; rejects when it cannot play. */
function played(audio: HTMLAudioElement, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      audio.removeEventListener('ended', done);
      audio.removeEventListener('error', failed);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const failed = () => {
      done();
      reject(new Error(`the browser could not play the audio (${audio.error?.message || 'unknown error'})`));
    };
    audio.addEventListener('ended', done);
    audio.addEventListener('error', failed);
    signal.addEventListener('abort', done);
  });
}

/**
 * Read-aloud with `model` and `voice`, one answer at a time. `onModelGone` is called when the
 * server no longer knows the model (so the page can reload its list), as for dictation.
 */
export function useReadAloud(model: string, voice: string, onModelGone: () => void): ReadAloud {
  const [active, setActive] = useState<ReadAloud['active']>(null);
  const [error, setError] = useState<ReadAloud['error']>(null);
  const audioRef = useRef<HTMLAudioElement | null>(null);
  const current = useRef<{ key: string; abort: AbortController } | null>(null);
  const gone = useRef(onModelGone);
  gone.current = onModelGone;

  const stop = () => {
    current.current?.abort.abort();
    current.current = null;
    audioRef.current?.pause();
    setActive(null);
  };
  useEffect(() => stop, []);

  const read = async (key: string, markdown: string) => {
    const audio = audioRef.current;
    if (!audio) return;
    const abort = new AbortController();
    const mine = { key, abort };
    current.current = mine;
    setError(null);
    setActive({ key, phase: 'loading' });
    const urls: string[] = [];
    try {
      const parts = speechParts(speakableText(markdown));
      if (parts.length === 0) throw new Error('this answer has no text to read');
      // The next part is made while the one before it plays.
      let next = synthesize(parts[0]!, model, voice, abort.signal);
      for (let i = 0; i < parts.length; i++) {
        const blob = await next;
        if (i + 1 < parts.length) {
          next = synthesize(parts[i + 1]!, model, voice, abort.signal);
          next.catch(() => undefined);
        }
        if (abort.signal.aborted) return;
        const url = URL.createObjectURL(blob);
        urls.push(url);
        audio.src = url;
        const ended = played(audio, abort.signal);
        // Observed now: when play() fails, the element's error event rejects this one too.
        ended.catch(() => undefined);
        await audio.play();
        setActive({ key, phase: 'playing' });
        await ended;
        if (abort.signal.aborted) return;
      }
    } catch (err) {
      if (abort.signal.aborted || (err as Error).name === 'AbortError') return;
      if (err instanceof ApiError && err.status === 404) gone.current();
      setError({ key, message: `Could not read this answer aloud: ${why(err)}` });
    } finally {
      for (const url of urls) URL.revokeObjectURL(url);
      if (current.current === mine) {
        current.current = null;
        setActive(null);
      }
    }
  };

  const toggle = (key: string, markdown: string) => {
    const same = current.current?.key === key;
    stop();
    if (!same) void read(key, markdown);
  };

  return { active, error, toggle, audioRef };
}

/** A picker of the models with one capability, or a line saying none has it. */
function ModelPicker({
  id,
  label,
  capability,
  models,
  value,
  onChange,
}: {
  id: string;
  label: string;
  capability: string;
  models: ModelInfo[];
  value: string;
  onChange: (name: string) => void;
}) {
  if (models.length === 0)
    return (
      <p class="muted" data-testid={`${id}-none`}>
        {label}: none installed (no model has the <code>{capability}</code> capability).
      </p>
    );
  return (
    <>
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => onChange(e.currentTarget.value)}>
        {models.map((m) => (
          <option key={m.name} value={m.name}>
            {m.name}
          </option>
        ))}
      </select>
    </>
  );
}

/**
 * The voice part of the chat settings: which models transcribe and speak, the voice, auto-send.
 * `settings` carries the models in effect (the chosen ones, or the first installed).
 */
export function VoiceSettingsFields({ models, settings, onChange }: { models: ModelInfo[]; settings: VoiceSettings; onChange: (s: VoiceSettings) => void }) {
  const transcribers = modelsWith(models, 'transcription');
  const speakers = modelsWith(models, 'speech');
  const voices = speakers.find((m) => m.name === settings.speechModel)?.voices ?? [];
  return (
    <fieldset class="voice-settings">
      <legend>Voice (this browser)</legend>
      <div class="grid3">
        <div>
          <ModelPicker
            id="transcription-model"
            label="Transcription model"
            capability="transcription"
            models={transcribers}
            value={settings.transcriptionModel}
            onChange={(transcriptionModel) => onChange({ ...settings, transcriptionModel })}
          />
          {transcribers.length > 0 && (
            <label class="inline">
              <input type="checkbox" checked={settings.autoSend} onChange={(e) => onChange({ ...settings, autoSend: e.currentTarget.checked })} /> Send the
              transcribed text at once
            </label>
          )}
        </div>
        <div>
          <ModelPicker
            id="speech-model"
            label="Speech model"
            capability="speech"
            models={speakers}
            value={settings.speechModel}
            onChange={(speechModel) => onChange({ ...settings, speechModel })}
          />
        </div>
        <div>
          <label for="voice">Voice</label>
          {voices.length > 0 ? (
            <select id="voice" value={settings.voice} onChange={(e) => onChange({ ...settings, voice: e.currentTarget.value })}>
              {voices.map((v) => (
                <option key={v} value={v}>
                  {v}
                </option>
              ))}
            </select>
          ) : (
            <input id="voice" value={settings.voice} placeholder={DEFAULT_VOICE} onInput={(e) => onChange({ ...settings, voice: e.currentTarget.value })} />
          )}
        </div>
      </div>
    </fieldset>
  );
}
