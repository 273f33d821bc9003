/**
 * Terminal progress for `lia pull` and `lia push`: one bar per layer (keyed by digest) with the
 * percentage, bytes, speed and time left, and the other statuses as plain lines. On a terminal
 * it redraws in place at most every 100 ms; elsewhere (a pipe, a log) it prints each status once
 * and each layer once when it finishes.
 *
 * @module
 */
import { formatBytes } from 'lia/utils';

/** A progress line of the pull/push/create streams. */
export interface ProgressLine {
  status: string;
  digest?: string;
  total?: number;
  completed?: number;
}

interface Bar {
  digest: string;
  total: number;
  completed: number;
  started: number;
  /** Recent (time, bytes) samples for the current speed. */
  samples: Array<[number, number]>;
  printed: boolean;
}

type Entry = { kind: 'status'; text: string } | { kind: 'bar'; bar: Bar };

/** `45s`, `3m12s`, `1h4m`. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

const WINDOW_MS = 3000;

/** Draws the progress of one pull, push or create stream; feed it every line, then call `done()`. */
export class ProgressView {
  readonly #out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  readonly #verb: string;
  readonly #entries: Entry[] = [];
  readonly #bars = new Map<string, Bar>();
  readonly #now: () => number;
  #drawn = 0;
  #lastDraw = -Infinity;

  constructor(out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number }, verb: string, now: () => number = Date.now) {
    this.#out = out;
    this.#verb = verb;
    this.#now = now;
  }

  get #tty(): boolean {
    return this.#out.isTTY === true;
  }

  update(p: ProgressLine): void {
    const t = this.#now();
    if (p.digest && typeof p.total === 'number') {
      let bar = this.#bars.get(p.digest);
      if (!bar) {
        bar = { digest: p.digest, total: p.total, completed: 0, started: t, samples: [], printed: false };
        this.#bars.set(p.digest, bar);
        this.#entries.push({ kind: 'bar', bar });
      }
      bar.total = p.total;
      bar.completed = p.completed ?? bar.completed;
      bar.samples.push([t, bar.completed]);
      while (bar.samples.length > 2 && t - bar.samples[0]![0] > WINDOW_MS) bar.samples.shift();
      if (!this.#tty && !bar.printed && bar.completed >= bar.total) {
        bar.printed = true;
        this.#out.write(this.#barLine(bar, t) + '\n');
      }
    } else {
      const last = this.#entries[this.#entries.length - 1];
      if (last?.kind === 'status' && last.text === p.status) return;
      this.#entries.push({ kind: 'status', text: p.status });
      if (!this.#tty) this.#out.write(p.status + '\n');
    }
    if (this.#tty && t - this.#lastDraw >= 100) this.#draw(t);
  }

  /** Draws the final state (call once at the end). */
  done(): void {
    if (this.#tty) this.#draw(this.#now());
  }

  /** Bytes per second over the last few seconds (over the whole layer once it is done). */
  #speed(bar: Bar, t: number): number {
    if (bar.completed >= bar.total) {
      const secs = Math.max(0.001, (t - bar.started) / 1000);
      return bar.completed / secs;
    }
    const first = bar.samples[0];
    if (!first || t - first[0] < 50) return 0;
    return (bar.completed - first[1]) / ((t - first[0]) / 1000);
  }

  #barLine(bar: Bar, t: number): string {
    const pct = bar.total > 0 ? Math.floor((bar.completed / bar.total) * 100) : 100;
    const speed = this.#speed(bar, t);
    const done = bar.completed >= bar.total;
    const eta = done ? '' : speed > 0 ? `  ${formatDuration((bar.total - bar.completed) / speed)}` : '';
    const label = `${this.#verb} ${bar.digest.replace(/^sha256:/, '').slice(0, 12)}`;
    const tail = `${formatBytes(bar.completed)}/${formatBytes(bar.total)}${speed > 0 ? `  ${formatBytes(speed)}/s` : ''}${eta}`;
    const width = Math.max(10, Math.min(40, (this.#out.columns ?? 100) - label.length - tail.length - 12));
    const filled = Math.round((pct / 100) * width);
    return `${label} ${String(pct).padStart(3)}% ▕${'█'.repeat(filled)}${' '.repeat(width - filled)}▏ ${tail}`;
  }

  #draw(t: number): void {
    this.#lastDraw = t;
    let s = this.#drawn > 0 ? `\x1b[${this.#drawn}F` : '';
    for (const e of this.#entries) s += `\x1b[2K${e.kind === 'status' ? e.text : this.#barLine(e.bar, t)}\n`;
    this.#drawn = this.#entries.length;
    this.#out.write(s);
  }
}
