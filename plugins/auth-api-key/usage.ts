/**
 * Usage per key and per model: requests, prompt tokens and generated tokens, and when each key was
 * last used. Kept in memory, fed by the engine's inference events (`hooks.inferenceObservers`,
 * which name the principal), and saved to `<data dir>/usage.json` at most once per `debounceMs`
 * after a change (an atomic replace, so a crash leaves the previous file whole) and on close.
 * At most the last `debounceMs` of counts are lost when the process is killed.
 *
 * @module
 */
import type { InferenceEvent } from 'lia/plugin/contracts';
import { writeFileAtomic, readTextOrNull } from 'lia/utils';
import path from 'node:path';

export interface Counts {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
}

export interface KeyUsage extends Counts {
  models: Record<string, Counts>;
}

interface Entry {
  usage: KeyUsage;
  /** Milliseconds since the epoch, or 0 for never. */
  lastUsed: number;
}

const zero = (): Counts => ({ requests: 0, prompt_tokens: 0, completion_tokens: 0 });
const count = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0);
const counts = (v: unknown): Counts => {
  const o = (v ?? {}) as Record<string, unknown>;
  return { requests: count(o['requests']), prompt_tokens: count(o['prompt_tokens']), completion_tokens: count(o['completion_tokens']) };
};

export class UsageStore {
  readonly file: string;
  readonly #entries = new Map<string, Entry>();
  readonly #debounceMs: number;
  #timer: NodeJS.Timeout | null = null;
  #writing: Promise<void> = Promise.resolve();
  #onError: (err: Error) => void;

  private constructor(file: string, debounceMs: number, onError: (err: Error) => void) {
    this.file = file;
    this.#debounceMs = debounceMs;
    this.#onError = onError;
  }

  /**
   * Loads `<dataDir>/usage.json` (a missing or unreadable file starts from zero).
   * `debounceMs` defaults to 2000.
   */
  static async open(dataDir: string, options: { debounceMs?: number; onError?: (err: Error) => void } = {}): Promise<UsageStore> {
    const store = new UsageStore(path.join(dataDir, 'usage.json'), options.debounceMs ?? 2000, options.onError ?? (() => {}));
    const text = readTextOrNull(store.file);
    if (text === null) return store;
    let data: { keys?: Record<string, { last_used_at?: unknown; models?: Record<string, unknown> } & Record<string, unknown>> };
    try {
      data = JSON.parse(text) as typeof data;
    } catch {
      store.#onError(new Error(`${store.file} is not JSON; usage starts from zero`));
      return store;
    }
    for (const [name, v] of Object.entries(data.keys ?? {})) {
      const models: Record<string, Counts> = {};
      for (const [model, m] of Object.entries(v.models ?? {})) models[model] = counts(m);
      const lastUsed = typeof v.last_used_at === 'string' ? Date.parse(v.last_used_at) : NaN;
      store.#entries.set(name, { usage: { ...counts(v), models }, lastUsed: Number.isFinite(lastUsed) ? lastUsed : 0 });
    }
    return store;
  }

  #entry(name: string): Entry {
    let e = this.#entries.get(name);
    if (!e) {
      e = { usage: { ...zero(), models: {} }, lastUsed: 0 };
      this.#entries.set(name, e);
    }
    return e;
  }

  /** Records that a key was used now (any request). */
  touch(name: string, now = Date.now()): void {
    this.#entry(name).lastUsed = now;
    this.#schedule();
  }

  /** Counts an inference event of a principal. */
  record(event: InferenceEvent): void {
    if (event.type !== 'request' && event.type !== 'finished') return;
    if (!event.principal) return;
    const usage = this.#entry(event.principal).usage;
    const model = (usage.models[event.model] ??= zero());
    if (event.type === 'request') {
      usage.requests++;
      model.requests++;
    } else {
      usage.prompt_tokens += event.promptTokens;
      usage.completion_tokens += event.completionTokens;
      model.prompt_tokens += event.promptTokens;
      model.completion_tokens += event.completionTokens;
    }
    this.#schedule();
  }

  /** Forgets a key (revoked), so a later key of the same name starts from zero. */
  forget(name: string): void {
    if (this.#entries.delete(name)) this.#schedule();
  }

  totals(name: string): Counts {
    const u = this.#entries.get(name)?.usage;
    return u ? { requests: u.requests, prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens } : zero();
  }

  lastUsedAt(name: string): string | null {
    const t = this.#entries.get(name)?.lastUsed ?? 0;
    return t > 0 ? new Date(t).toISOString() : null;
  }

  /** Every key's usage, totals and per model. */
  all(): Array<{ name: string } & KeyUsage> {
    return [...this.#entries].map(([name, e]) => ({ name, ...e.usage, models: { ...e.usage.models } }));
  }

  #schedule(): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.flush();
    }, this.#debounceMs);
    this.#timer.unref();
  }

  /** Writes the file now (after any write under way). */
  flush(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    this.#writing = this.#writing.then(async () => {
      const keys: Record<string, KeyUsage & { last_used_at: string | null }> = {};
      for (const [name, e] of this.#entries) keys[name] = { ...e.usage, last_used_at: e.lastUsed > 0 ? new Date(e.lastUsed).toISOString() : null };
      try {
        await writeFileAtomic(this.file, JSON.stringify({ version: 1, keys }) + '\n', { mode: 0o600 });
      } catch (err) {
        this.#onError(err as Error);
      }
    });
    return this.#writing;
  }
}
