/**
 * Logging: one pino logger (Fastify's) writing JSON lines to stdout, teed into a {@link LogHub}
 * that keeps the recent lines of each service in a ring buffer, so `/system/logs` can answer in
 * the embedded default without a journal. A line belongs to a service through its `svc` binding
 * (`ctx.log` of a plugin that implements a service carries it).
 *
 * The `Authorization` header and anything named like a key are redacted before a line is written.
 *
 * @module
 */
import { Writable } from 'node:stream';
import type { LogLine } from './contracts/host.js';

/** pino's numeric levels mapped to syslog priorities (what journald reports). */
function priorityOf(level: number): number {
  if (level >= 60) return 2; // fatal → crit
  if (level >= 50) return 3; // error → err
  if (level >= 40) return 4; // warn → warning
  if (level >= 30) return 6; // info → info
  return 7; // debug, trace → debug
}

/** Paths pino redacts in every line. */
export const REDACT_PATHS = ['req.headers.authorization', 'headers.authorization', 'authorization', 'key', 'apiKey', 'api_key', '*.key', '*.apiKey'];

export class LogHub {
  readonly #buffers = new Map<string, LogLine[]>();
  readonly #capacity: number;
  readonly #listeners: ((service: string, line: LogLine) => void)[] = [];

  /** @param capacity lines kept per service. Defaults to 10000 (the `/system/logs` maximum). */
  constructor(capacity = 10_000) {
    this.#capacity = capacity;
  }

  /** Appends a line to a service's buffer. */
  push(service: string, line: LogLine): void {
    let buf = this.#buffers.get(service);
    if (!buf) this.#buffers.set(service, (buf = []));
    buf.push(line);
    if (buf.length > this.#capacity) buf.splice(0, buf.length - this.#capacity);
    for (const listener of this.#listeners) listener(service, line);
  }

  /** Calls `listener` for every line pushed from now on (the per-service log files use it). */
  onLine(listener: (service: string, line: LogLine) => void): void {
    this.#listeners.push(listener);
  }

  /** The last `lines` lines of a service, oldest first. */
  tail(service: string, lines: number): LogLine[] {
    const buf = this.#buffers.get(service) ?? [];
    return buf.slice(Math.max(0, buf.length - lines));
  }

  /** A writable that takes pino's JSON lines, files them by `svc`, and passes them on. */
  stream(next: NodeJS.WritableStream | null): Writable {
    return new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        const text = chunk.toString('utf8');
        for (const raw of text.split('\n')) {
          if (!raw) continue;
          try {
            const obj = JSON.parse(raw) as { svc?: string; level?: number; time?: number; msg?: string; err?: { message?: string } };
            if (obj.svc) {
              this.push(obj.svc, {
                timestamp: new Date(obj.time ?? Date.now()).toISOString(),
                priority: priorityOf(obj.level ?? 30),
                message: obj.msg ?? obj.err?.message ?? '',
              });
            }
          } catch {
            // Not JSON (pretty output): keep it out of the buffers, still print it.
          }
        }
        if (next) next.write(chunk, cb);
        else cb();
      },
    });
  }
}
