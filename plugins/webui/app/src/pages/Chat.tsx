/**
 * The chat page: conversations in a sidebar (this browser's storage), a model picker limited to
 * models that can chat, streaming answers from `/api/chat` with Stop, regenerate, edit and
 * resend, a system prompt and options, and the figures the API reports with each answer; a
 * message spoken into the microphone and answers read aloud where models for them are installed.
 */
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { json, ndjson } from '../api';
import { ErrorPanel, useLoad, Confirm, CopyButton } from '../common';
import {
  type AnswerStats,
  type ChatMessage,
  type Conversation,
  downloadJson,
  emptyConversation,
  loadConversations,
  parseImport,
  saveConversations,
} from '../conversations';
import { ms } from '../format';
import { canChat, listModels } from '../models';
import { loadVoiceSettings, modelsWith, pickModel, pickVoice, saveVoiceSettings, type VoiceSettings } from '../voice';
import { Markdown } from './Markdown';
import { useDictation, useReadAloud, VoiceSettingsFields } from './Voice';

/**
 * Milliseconds without a first token after which the page asks `/api/ps` whether the model is
 * being loaded, to say so instead of "Waiting for the model…".
 */
const LOADING_CHECK_MS = 400;

/** One line of `/api/chat`'s stream; the last one carries the figures. */
interface ChatChunk extends Omit<AnswerStats, 'first_token_ms' | 'stopped'> {
  message?: { role: string; content?: string; thinking?: string };
  done?: boolean;
}

function Stats({ s }: { s: AnswerStats }) {
  const rate = s.eval_count && s.eval_duration ? (s.eval_count / (s.eval_duration / 1e9)).toFixed(1) : null;
  const apiFirst = s.load_duration !== undefined || s.prompt_eval_duration !== undefined ? (s.load_duration ?? 0) + (s.prompt_eval_duration ?? 0) : undefined;
  const parts = [
    s.stopped ? 'stopped' : null,
    s.eval_count !== undefined ? `${s.eval_count} tokens` : null,
    rate ? `${rate} tokens/s` : null,
    s.prompt_eval_count !== undefined ? `prompt ${s.prompt_eval_count} tokens in ${ms(s.prompt_eval_duration)}` : null,
    apiFirst !== undefined ? `first token (API) ${ms(apiFirst)}` : null,
    s.first_token_ms !== undefined ? `first token on screen ${s.first_token_ms.toFixed(0)} ms` : null,
    s.load_duration !== undefined && s.load_duration > 1e8 ? `model load ${ms(s.load_duration)}` : null,
  ].filter((p): p is string => p !== null);
  return (
    <p class="stats" data-testid="answer-stats">
      {parts.join(' · ')}
    </p>
  );
}

function number(v: string): number | undefined {
  if (v.trim() === '') return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

export function Chat() {
  const models = useLoad(listModels);
  const chatModels = (models.data ?? []).filter(canChat);
  const [list, setList] = useState<Conversation[]>(() => {
    const l = loadConversations();
    return l.length > 0 ? l : [emptyConversation()];
  });
  const [currentId, setCurrentId] = useState(() => list[0]!.id);
  const [input, setInput] = useState('');
  const [busy, setBusy] = useState(false);
  const [phase, setPhase] = useState('');
  const [editing, setEditing] = useState<{ index: number; text: string } | null>(null);
  const [renaming, setRenaming] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<Conversation | null>(null);
  const [showSettings, setShowSettings] = useState(false);
  const [showList, setShowList] = useState(false);
  const [importError, setImportError] = useState<string | null>(null);
  const abort = useRef<AbortController | null>(null);
  const busyRef = useRef(false);
  const scroller = useRef<HTMLDivElement>(null);
  const prompt = useRef<HTMLTextAreaElement>(null);
  const stick = useRef(true);
  const [voice, setVoice] = useState<VoiceSettings>(loadVoiceSettings);

  const current = list.find((c) => c.id === currentId) ?? list[0]!;
  const model = current.model && chatModels.some((m) => m.name === current.model) ? current.model : (chatModels[0]?.name ?? '');
  const transcriptionModel = pickModel(voice.transcriptionModel, modelsWith(models.data ?? [], 'transcription'));
  const speechModel = pickModel(voice.speechModel, modelsWith(models.data ?? [], 'speech'));
  const speechVoices = models.data?.find((m) => m.name === speechModel)?.voices ?? [];
  const speechVoice = pickVoice(voice.voice, speechVoices);
  const changeVoice = (s: VoiceSettings) => {
    setVoice(s);
    saveVoiceSettings(s);
  };

  // Persist whenever the list changes, except token by token during a stream.
  useEffect(() => {
    if (!busy) saveConversations(list);
  }, [list, busy]);

  const update = (id: string, change: (c: Conversation) => Conversation) =>
    setList((l) => l.map((c) => (c.id === id ? { ...change(c), updated: Date.now() } : c)));

  useLayoutEffect(() => {
    const el = scroller.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  });
  const onScroll = () => {
    const el = scroller.current;
    if (el) stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  };

  /** Streams an answer to `history` (ending with the user's message) into conversation `id`. */
  const stream = async (id: string, history: ChatMessage[]) => {
    if (busyRef.current || !model) return;
    busyRef.current = true;
    setBusy(true);
    stick.current = true;
    const conv = list.find((c) => c.id === id) ?? current;
    const answer: ChatMessage = { role: 'assistant', content: '' };
    update(id, (c) => ({
      ...c,
      model,
      messages: [...history, answer],
      title: c.messages.length === 0 && history[0] ? history[0].content.slice(0, 60) : c.title,
    }));
    const setAnswer = (patch: Partial<ChatMessage>) =>
      update(id, (c) => ({ ...c, messages: [...c.messages.slice(0, -1), { ...c.messages[c.messages.length - 1]!, ...patch }] }));
    const controller = new AbortController();
    abort.current = controller;
    setPhase('Waiting for the model…');
    const started = performance.now();
    let content = '';
    let thinking = '';
    let firstToken: number | undefined;
    // Whether the model is being loaded is asked only when the first token is slow to come, so an
    // answer from a loaded model goes alone instead of beside a second request for every message.
    const loadingCheck = setTimeout(() => {
      if (firstToken !== undefined || !busyRef.current) return;
      json<{ models: { name: string }[] }>('/api/ps').then(
        (ps) => {
          if (!ps.models.some((m) => m.name === model) && busyRef.current && firstToken === undefined) setPhase('Loading the model into memory…');
        },
        () => undefined,
      );
    }, LOADING_CHECK_MS);
    const options: Record<string, number> = {};
    for (const k of ['temperature', 'num_predict', 'num_ctx'] as const) {
      const v = number(conv.options[k]);
      if (v !== undefined) options[k] = v;
    }
    const messages = [
      ...(conv.system.trim() ? [{ role: 'system', content: conv.system }] : []),
      ...history.filter((m) => !m.error).map((m) => ({ role: m.role, content: m.content })),
    ];
    try {
      await ndjson<ChatChunk>(
        '/api/chat',
        { model, messages, stream: true, ...(Object.keys(options).length ? { options } : {}) },
        (chunk) => {
          const piece = chunk.message?.content ?? '';
          const thought = chunk.message?.thinking ?? '';
          if ((piece || thought) && firstToken === undefined) {
            firstToken = performance.now() - started;
            setPhase('');
          }
          content += piece;
          thinking += thought;
          if (chunk.done) {
            const { eval_count, eval_duration, prompt_eval_count, prompt_eval_duration, load_duration, total_duration } = chunk;
            setAnswer({
              content,
              thinking: thinking || undefined,
              stats: { eval_count, eval_duration, prompt_eval_count, prompt_eval_duration, load_duration, total_duration, first_token_ms: firstToken },
            });
          } else setAnswer({ content, thinking: thinking || undefined });
        },
        controller.signal,
      );
    } catch (err) {
      if ((err as Error).name === 'AbortError') setAnswer({ content, stats: { first_token_ms: firstToken, stopped: true } });
      else setAnswer({ content, error: (err as Error).message });
    } finally {
      clearTimeout(loadingCheck);
      abort.current = null;
      busyRef.current = false;
      setBusy(false);
      setPhase('');
    }
  };

  const sendText = (text: string) => {
    void stream(current.id, [...current.messages.filter((m) => !m.error || m.content), { role: 'user', content: text }]);
  };

  const send = () => {
    const text = input.trim();
    if (!text || busyRef.current || !model) return;
    setInput('');
    sendText(text);
  };

  // What was said goes into the message box for the user to read and send (Open WebUI's default),
  // or straight out when the setting asks for it and nothing is being answered or typed.
  const dictation = useDictation(
    transcriptionModel,
    (text) => {
      if (voice.autoSend && model && !busyRef.current && input.trim() === '') return sendText(text);
      setInput((prev) => (prev.trim() ? `${prev.trimEnd()} ${text}` : text));
      prompt.current?.focus();
    },
    () => void models.reload(),
  );
  const readAloud = useReadAloud(speechModel, speechVoice, () => void models.reload());

  const regenerate = () => {
    const msgs = current.messages;
    const lastUser = msgs.map((m) => m.role).lastIndexOf('user');
    if (lastUser >= 0) void stream(current.id, msgs.slice(0, lastUser + 1));
  };

  const resendEdit = () => {
    if (!editing) return;
    const history = [...current.messages.slice(0, editing.index), { role: 'user' as const, content: editing.text }];
    setEditing(null);
    void stream(current.id, history);
  };

  const newChat = () => {
    const c = emptyConversation(model);
    setList((l) => [c, ...l]);
    setCurrentId(c.id);
    setShowList(false);
  };

  const remove = (c: Conversation) => {
    const rest = list.filter((x) => x.id !== c.id);
    const next = rest.length > 0 ? rest : [emptyConversation(model)];
    setList(next);
    if (c.id === currentId) setCurrentId(next[0]!.id);
    setDeleting(null);
  };

  const importFile = async (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const file = input.files?.[0];
    input.value = '';
    if (!file) return;
    try {
      const imported = parseImport(await file.text());
      setList((l) => [...imported, ...l]);
      setCurrentId(imported[0]!.id);
      setImportError(null);
    } catch (err) {
      setImportError(`Import failed: ${(err as Error).message}`);
    }
  };

  const sorted = [...list].sort((a, b) => b.updated - a.updated);
  const last = current.messages[current.messages.length - 1];

  return (
    <div class="chat">
      <aside class={`conversations ${showList ? 'open' : ''}`} aria-label="Conversations">
        <div class="row">
          <button type="button" class="primary" onClick={newChat}>
            New chat
          </button>
          <button type="button" class="narrow-only" aria-expanded={showList} onClick={() => setShowList(!showList)}>
            {showList ? 'Hide list' : 'Conversations'}
          </button>
        </div>
        <ul class="conv-list">
          {sorted.map((c) => (
            <li key={c.id} class={c.id === current.id ? 'active' : ''}>
              {renaming === c.id ? (
                <form
                  onSubmit={(e) => {
                    e.preventDefault();
                    setRenaming(null);
                  }}
                >
                  <label class="sr-only" for={`rename-${c.id}`}>
                    New name
                  </label>
                  <input
                    id={`rename-${c.id}`}
                    value={c.title}
                    autoFocus
                    onInput={(e) => update(c.id, (x) => ({ ...x, title: e.currentTarget.value }))}
                    onBlur={() => setRenaming(null)}
                  />
                </form>
              ) : (
                <button
                  type="button"
                  class="link conv-title"
                  aria-current={c.id === current.id ? 'true' : undefined}
                  onClick={() => {
                    setCurrentId(c.id);
                    setShowList(false);
                  }}
                >
                  {c.title || 'Untitled'}
                </button>
              )}
              <span class="conv-actions">
                <button type="button" class="small" aria-label={`Rename ${c.title}`} onClick={() => setRenaming(c.id)}>
                  Rename
                </button>
                <button type="button" class="small" aria-label={`Delete ${c.title}`} onClick={() => setDeleting(c)}>
                  Delete
                </button>
              </span>
            </li>
          ))}
        </ul>
        <div class="row wrap">
          <button type="button" class="small" onClick={() => downloadJson(`lia-chat-${current.id.slice(0, 8)}.json`, current)}>
            Export this
          </button>
          <button type="button" class="small" onClick={() => downloadJson('lia-chats.json', list)}>
            Export all
          </button>
          <label class="button small" for="import-file">
            Import…
          </label>
          <input id="import-file" class="sr-only" type="file" accept="application/json,.json" onChange={importFile} />
        </div>
        {importError && (
          <p class="error" role="alert">
            {importError}
          </p>
        )}
      </aside>

      <section class="conversation" aria-label="Conversation">
        <div class="toolbar row wrap">
          <label for="model">Model</label>
          <select id="model" value={model} disabled={busy} onChange={(e) => update(current.id, (c) => ({ ...c, model: e.currentTarget.value }))}>
            {chatModels.map((m) => (
              <option key={m.name} value={m.name}>
                {m.name}
              </option>
            ))}
          </select>
          <button type="button" aria-expanded={showSettings} aria-controls="chat-settings" onClick={() => setShowSettings(!showSettings)}>
            Settings
          </button>
        </div>
        {models.error && <ErrorPanel error={models.error} what="the models" />}
        {models.data && chatModels.length === 0 && (
          <p class="notice">
            No model that can chat is installed. Pull or import one on the <a href="#/models">Models</a> page.
          </p>
        )}
        {showSettings && (
          <div id="chat-settings" class="settings card">
            <label for="system">System prompt</label>
            <textarea id="system" rows={3} value={current.system} onInput={(e) => update(current.id, (c) => ({ ...c, system: e.currentTarget.value }))} />
            <div class="grid3">
              <div>
                <label for="temperature">Temperature</label>
                <input
                  id="temperature"
                  inputMode="decimal"
                  placeholder="model default"
                  value={current.options.temperature}
                  onInput={(e) => update(current.id, (c) => ({ ...c, options: { ...c.options, temperature: e.currentTarget.value } }))}
                />
              </div>
              <div>
                <label for="num_predict">Max tokens</label>
                <input
                  id="num_predict"
                  inputMode="numeric"
                  placeholder="model default"
                  value={current.options.num_predict}
                  onInput={(e) => update(current.id, (c) => ({ ...c, options: { ...c.options, num_predict: e.currentTarget.value } }))}
                />
              </div>
              <div>
                <label for="num_ctx">Context length</label>
                <input
                  id="num_ctx"
                  inputMode="numeric"
                  placeholder="model default"
                  value={current.options.num_ctx}
                  onInput={(e) => update(current.id, (c) => ({ ...c, options: { ...c.options, num_ctx: e.currentTarget.value } }))}
                />
              </div>
            </div>
            <VoiceSettingsFields
              models={models.data ?? []}
              settings={{ ...voice, transcriptionModel, speechModel, voice: speechVoices.length > 0 ? speechVoice : voice.voice }}
              onChange={changeVoice}
            />
          </div>
        )}
        <div class="messages" ref={scroller} onScroll={onScroll} aria-live="polite" data-testid="messages">
          {current.messages.length === 0 && <p class="muted center">Ask anything. Enter sends, Shift+Enter starts a new line.</p>}
          {current.messages.map((m, i) => (
            <article key={i} class={`msg ${m.role}`} aria-label={m.role === 'user' ? 'You' : 'Assistant'}>
              {editing?.index === i ? (
                <form
                  onSubmit={(e) => {
                    e.preventDefault();
                    resendEdit();
                  }}
                >
                  <label class="sr-only" for="edit-text">
                    Edit your message
                  </label>
                  <textarea id="edit-text" rows={3} value={editing.text} onInput={(e) => setEditing({ index: i, text: e.currentTarget.value })} />
                  <div class="row end">
                    <button type="button" onClick={() => setEditing(null)}>
                      Cancel
                    </button>
                    <button type="submit" class="primary" disabled={busy}>
                      Save and resend
                    </button>
                  </div>
                </form>
              ) : m.role === 'assistant' ? (
                <>
                  {m.thinking && (
                    <details class="thinking">
                      <summary>Thinking</summary>
                      <p>{m.thinking}</p>
                    </details>
                  )}
                  <Markdown text={m.content} />
                  {busy && i === current.messages.length - 1 && phase && (
                    <p class="muted" role="status">
                      {phase}
                    </p>
                  )}
                  {m.error && <ErrorPanel error={new Error(m.error)} />}
                  {m.stats && <Stats s={m.stats} />}
                  {!(busy && i === current.messages.length - 1) && (
                    <div class="row msg-actions">
                      <CopyButton text={m.content} />
                      {speechModel && m.content.trim() !== '' && (
                        <button
                          type="button"
                          class="small"
                          data-state={readAloud.active?.key === `${current.id}:${i}` ? readAloud.active.phase : 'idle'}
                          onClick={() => readAloud.toggle(`${current.id}:${i}`, m.content)}
                        >
                          {readAloud.active?.key === `${current.id}:${i}` ? 'Stop reading' : 'Read aloud'}
                        </button>
                      )}
                      {!busy && i === current.messages.length - 1 && (
                        <button type="button" class="small" onClick={regenerate}>
                          Regenerate
                        </button>
                      )}
                    </div>
                  )}
                  {readAloud.error?.key === `${current.id}:${i}` && (
                    <p class="error-text" role="alert">
                      {readAloud.error.message}
                    </p>
                  )}
                </>
              ) : (
                <>
                  <p class="user-text">{m.content}</p>
                  {!busy && (
                    <div class="row msg-actions">
                      <button type="button" class="small" onClick={() => setEditing({ index: i, text: m.content })}>
                        Edit
                      </button>
                    </div>
                  )}
                </>
              )}
            </article>
          ))}
        </div>
        <form
          class="composer"
          onSubmit={(e) => {
            e.preventDefault();
            send();
          }}
        >
          <label for="prompt" class="sr-only">
            Message
          </label>
          <textarea
            id="prompt"
            ref={prompt}
            rows={2}
            placeholder={model ? `Message ${model}` : 'No chat model'}
            value={input}
            onInput={(e) => setInput(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
                e.preventDefault();
                send();
              }
            }}
          />
          {busy && (
            <button type="button" class="danger" onClick={() => abort.current?.abort()}>
              Stop
            </button>
          )}
          {transcriptionModel &&
            (dictation.state === 'recording' ? (
              <button type="button" class="danger" onClick={dictation.stop}>
                Stop recording
              </button>
            ) : (
              <button type="button" disabled={dictation.state !== 'idle'} onClick={dictation.start}>
                Record voice
              </button>
            ))}
          <button type="submit" class="primary" disabled={busy || !model || input.trim() === ''}>
            Send
          </button>
        </form>
        {dictation.state === 'recording' && (
          <p class="muted" role="status" data-testid="dictation-status">
            Recording {Math.floor(dictation.seconds / 60)}:{String(dictation.seconds % 60).padStart(2, '0')}. Stop recording to turn it into text.
          </p>
        )}
        {dictation.state === 'transcribing' && (
          <p class="muted" role="status" data-testid="dictation-status">
            Transcribing with {transcriptionModel}…
          </p>
        )}
        {dictation.error && (
          <p class="error" role="alert" data-testid="dictation-error">
            {dictation.error}
          </p>
        )}
        {last?.role === 'user' && !busy && (
          <p class="muted">
            No answer yet:{' '}
            <button type="button" class="link" onClick={regenerate}>
              ask again
            </button>
          </p>
        )}
      </section>
      {/* Plays what Read aloud fetched; no controls of its own (the button starts and stops it). */}
      <audio ref={readAloud.audioRef} data-testid="read-aloud-audio" />
      <Confirm
        open={deleting !== null}
        title="Delete this conversation?"
        confirmLabel="Delete"
        danger
        onConfirm={() => deleting && remove(deleting)}
        onCancel={() => setDeleting(null)}
      >
        <p>"{deleting?.title}" is removed from this browser. Export it first to keep a copy.</p>
      </Confirm>
    </div>
  );
}
