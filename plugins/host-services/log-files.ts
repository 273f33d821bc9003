/**
 * Per-service log files for the embedded default, the journal's stand-in: every line a service
 * logs is appended as JSON to `<dir>/<service>.log`, rotated to `.1`, `.2`, ... when it passes the
 * size limit. Writes are batched and asynchronous. At start the files' recent lines are read
 * back as history, so `/system/logs` still shows the previous run after a restart.
 *
 * @module
 */
import { appendFile, mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { LogLine } from 'lia/plugin/contracts';

/** Folder, rotation size and generations kept. */
export interface LogFilesOptions {
  dir: string;
  /** Rotate a file once it is larger than this. */
  maxBytes: number;
  /** Rotated files kept per service (`.1` ... `.N`). */
  keep: number;
}

function parseLines(text: string): LogLine[] {
  const out: LogLine[] = [];
  for (const raw of text.split('\n')) {
    if (!raw) continue;
    try {
      const l = JSON.parse(raw) as Partial<LogLine>;
      if (typeof l.timestamp === 'string' && typeof l.message === 'string') {
        out.push({ timestamp: l.timestamp, priority: typeof l.priority === 'number' ? l.priority : 6, message: l.message });
      }
    } catch {
      // a torn last line after a crash: skip it
    }
  }
  return out;
}

/** The per-service log files; see the module comment. */
export class LogFiles {
  readonly #o: LogFilesOptions;
  readonly #pending = new Map<string, string[]>();
  readonly #sizes = new Map<string, number>();
  #chain: Promise<void> = Promise.resolve();
  #scheduled = false;

  constructor(options: LogFilesOptions) {
    this.#o = options;
  }

  file(service: string, generation = 0): string {
    return path.join(this.#o.dir, `${service}.log${generation > 0 ? `.${generation}` : ''}`);
  }

  /** Creates the folder and reads the last `limit` lines each service left in its files. */
  async open(services: readonly string[], limit: number): Promise<Map<string, LogLine[]>> {
    await mkdir(this.#o.dir, { recursive: true, mode: 0o700 });
    const history = new Map<string, LogLine[]>();
    for (const service of services) {
      const lines: LogLine[] = [];
      for (let g = 0; g <= this.#o.keep && lines.length < limit; g++) {
        try {
          lines.unshift(...parseLines(await readFile(this.file(service, g), 'utf8')));
        } catch {
          break;
        }
      }
      history.set(service, lines.slice(-limit));
      this.#sizes.set(
        service,
        await stat(this.file(service)).then(
          (s) => s.size,
          () => 0,
        ),
      );
    }
    return history;
  }

  /** Queues one line; it reaches the file on the next tick. */
  write(service: string, line: LogLine): void {
    let list = this.#pending.get(service);
    if (!list) this.#pending.set(service, (list = []));
    list.push(JSON.stringify(line) + '\n');
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#chain = this.#chain.then(() => this.#flush()).catch(() => undefined);
    });
  }

  /** Resolves once every queued line is on disk. */
  async flushed(): Promise<void> {
    await new Promise((r) => setImmediate(r));
    await this.#chain;
  }

  async #flush(): Promise<void> {
    const batches = [...this.#pending.entries()];
    this.#pending.clear();
    for (const [service, lines] of batches) {
      const data = lines.join('');
      const size = this.#sizes.get(service) ?? 0;
      if (size > 0 && size + data.length > this.#o.maxBytes) await this.#rotate(service);
      await appendFile(this.file(service), data, { mode: 0o600 });
      this.#sizes.set(service, (this.#sizes.get(service) ?? 0) + Buffer.byteLength(data));
    }
  }

  async #rotate(service: string): Promise<void> {
    await rm(this.file(service, this.#o.keep), { force: true });
    for (let g = this.#o.keep - 1; g >= 0; g--) {
      await rename(this.file(service, g), this.file(service, g + 1)).catch(() => undefined);
    }
    this.#sizes.set(service, 0);
  }
}
