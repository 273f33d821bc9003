/**
 * One upstream engine: its connection pool (an undici Agent with its CA and timeouts), the key it
 * is sent, its health and its outstanding requests. {@link Upstream.send} makes one request and
 * maps every failure to an {@link AppError} whose message names the upstream and the HTTP status,
 * never the upstream's body (it may echo internals or credentials).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { Agent, request, type Dispatcher } from 'undici';
import { Errors, isAppError, type AppError } from 'lia/plugin';
import type { UpstreamOptions } from './options.js';

/** Why a request failed, for the retry decision: `client` errors are the request's own and are not retried. */
export type FailureKind = 'client' | 'upstream';

/** An upstream failure with what the replica logic needs to know. */
export interface UpstreamFailure {
  error: AppError;
  kind: FailureKind;
  /** The upstream looks down (no connection, 5xx, timeout): take it out until a health check passes. */
  down: boolean;
}

export class Upstream {
  readonly name: string;
  readonly flavour: 'openai' | 'ollama';
  /** The base URL without a trailing slash. */
  readonly base: string;
  readonly options: UpstreamOptions;
  healthy = true;
  outstanding = 0;
  readonly #agent: Agent;
  readonly #auth: string | undefined;

  constructor(o: UpstreamOptions, env: NodeJS.ProcessEnv) {
    this.name = o.name;
    this.flavour = o.flavour;
    this.base = o.url.replace(/\/+$/, '');
    this.options = o;
    const key = o.key_file ? readOption(o, 'key_file').trim() : o.key_env ? env[o.key_env]?.trim() : undefined;
    if (o.key_env && !key) throw new Error(`upstream "${o.name}": the environment variable ${o.key_env} (key_env) is empty or unset`);
    if (o.key_file && !key) throw new Error(`upstream "${o.name}": the key file ${o.key_file} is empty`);
    this.#auth = key ? `Bearer ${key}` : undefined;
    const ca = o.ca_file ? readOption(o, 'ca_file') : undefined;
    this.#agent = new Agent({
      connect: { timeout: o.connect_timeout_ms, ...(ca ? { ca } : {}) },
      headersTimeout: o.timeout_ms,
      bodyTimeout: o.timeout_ms,
    });
  }

  /**
   * Sends a request; resolves with the answer once its status is 2xx, or throws an
   * {@link UpstreamFailure}-carrying error (see {@link failureOf}).
   */
  async send(method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { accept: 'application/json, text/event-stream, application/x-ndjson' };
    if (this.#auth) headers['authorization'] = this.#auth;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Dispatcher.ResponseData;
    try {
      res = await request(this.base + path, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal,
        dispatcher: this.#agent,
      });
    } catch (err) {
      throw this.#transportError(err, signal);
    }
    if (res.statusCode >= 200 && res.statusCode < 300) return res;
    res.body.dump().catch(() => undefined); // never read into an answer: it may carry internals
    throw this.#statusError(res.statusCode, res.headers['retry-after']);
  }

  /** The error for a failure while reading an answer that had started (a broken stream, a bad frame). */
  streamError(err: unknown, signal: AbortSignal): Error {
    if (signal.aborted) return signal.reason instanceof Error ? signal.reason : new Error('aborted');
    if (isAppError(err)) return (err as { [FAILURE]?: unknown })[FAILURE] ? err : withFailure(err, { kind: 'upstream', down: false });
    return this.#transportError(err, signal);
  }

  #transportError(err: unknown, signal: AbortSignal): Error {
    if (signal.aborted) return signal.reason instanceof Error ? signal.reason : new Error('aborted');
    const code = (err as { code?: string })?.code ?? '';
    const timedOut = code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT';
    const error = timedOut
      ? Errors.timeout(`upstream "${this.name}" did not answer in time`)
      : Errors.badGateway(`upstream "${this.name}" is unreachable or dropped the connection`);
    return withFailure(error, { kind: 'upstream', down: true });
  }

  #statusError(status: number, retryAfter: string | string[] | undefined): Error {
    const said = `upstream "${this.name}" answered HTTP ${status}`;
    if (status === 401 || status === 403) {
      return withFailure(Errors.badGateway(`${said}: it refused LIA's credentials (check key_file or key_env)`), { kind: 'upstream', down: true });
    }
    if (status === 404) return withFailure(Errors.modelNotFound(`${said}: it does not serve the model`), { kind: 'upstream', down: false });
    if (status === 408 || status === 429 || status === 503) {
      const after = typeof retryAfter === 'string' && /^\d{1,6}$/.test(retryAfter) ? retryAfter : '1';
      return withFailure(Errors.unavailable(`${said}: it is busy, try again`, { headers: { 'Retry-After': after } }), { kind: 'upstream', down: false });
    }
    if (status >= 400 && status < 500) return withFailure(Errors.badRequest(`${said}: it refused the request`), { kind: 'client', down: false });
    return withFailure(Errors.badGateway(`${said}`), { kind: 'upstream', down: true });
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}

/** A file an option names, or an error naming the upstream, the option and the file. */
function readOption(o: UpstreamOptions, option: 'key_file' | 'ca_file'): string {
  const file = o[option] ?? '';
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`upstream "${o.name}": cannot read the ${option} ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

const FAILURE = Symbol('upstream failure');

function withFailure(error: AppError, f: Omit<UpstreamFailure, 'error'>): AppError {
  Object.defineProperty(error, FAILURE, { value: f, enumerable: false });
  return error;
}

/** What an error says for the replica logic; errors of other origins (the client went away) are `client`. */
export function failureOf(err: unknown): Omit<UpstreamFailure, 'error'> {
  const f = (err as { [FAILURE]?: Omit<UpstreamFailure, 'error'> })?.[FAILURE];
  return f ?? { kind: 'client', down: false };
}
