/**
 * Conversations, kept in this browser's `localStorage` (key `lia.conversations`) so they survive
 * reloads; export and import move them as JSON. The appliance keeps no chat history.
 */
export interface AnswerStats {
  eval_count?: number;
  eval_duration?: number;
  prompt_eval_count?: number;
  prompt_eval_duration?: number;
  load_duration?: number;
  total_duration?: number;
  /** Milliseconds from Send to the first token on screen, measured in the browser. */
  first_token_ms?: number;
  stopped?: boolean;
}

export interface ChatMessage {
  role: 'user' | 'assistant' | 'system';
  content: string;
  thinking?: string;
  stats?: AnswerStats;
  error?: string;
}

export interface ChatOptions {
  /** Empty means the model's own default. */
  temperature: string;
  num_predict: string;
  num_ctx: string;
}

export interface Conversation {
  id: string;
  title: string;
  model: string;
  system: string;
  options: ChatOptions;
  messages: ChatMessage[];
  updated: number;
}

const STORE = 'lia.conversations';

export function emptyConversation(model = ''): Conversation {
  return {
    id: crypto.randomUUID(),
    title: 'New chat',
    model,
    system: '',
    options: { temperature: '', num_predict: '', num_ctx: '' },
    messages: [],
    updated: Date.now(),
  };
}

function isConversation(c: unknown): c is Conversation {
  if (!c || typeof c !== 'object') return false;
  const o = c as Record<string, unknown>;
  return typeof o.id === 'string' && typeof o.title === 'string' && Array.isArray(o.messages);
}

/** Fills what an older or imported conversation may lack. */
function normalise(c: Conversation): Conversation {
  const base = emptyConversation(typeof c.model === 'string' ? c.model : '');
  return { ...base, ...c, options: { ...base.options, ...(c.options ?? {}) }, messages: c.messages.filter((m) => m && typeof m.content === 'string') };
}

export function loadConversations(): Conversation[] {
  try {
    const raw = JSON.parse(localStorage.getItem(STORE) ?? '[]') as unknown;
    return Array.isArray(raw) ? raw.filter(isConversation).map(normalise) : [];
  } catch {
    return [];
  }
}

export function saveConversations(list: Conversation[]): void {
  localStorage.setItem(STORE, JSON.stringify(list));
}

/** Parses an export (one conversation or a list); fresh ids so an import never overwrites. */
export function parseImport(text: string): Conversation[] {
  const raw = JSON.parse(text) as unknown;
  const list = (Array.isArray(raw) ? raw : [raw]).filter(isConversation);
  if (list.length === 0) throw new Error('no conversations in this file');
  return list.map((c) => ({ ...normalise(c), id: crypto.randomUUID() }));
}

/** Starts a download of `data` as a JSON file. */
export function downloadJson(name: string, data: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: 'application/json' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
