/**
 * A small HTTP(S) client for registries on node:http, with what the registry protocol needs and
 * fetch does not give: redirects followed to other hosts without leaking the registry's
 * `Authorization`, a time limit on connecting and on the first byte, a stall limit while a body
 * streams, keep-alive agents with an operator-supplied CA, and the response body as a stream.
 * Every URL other than the registry's own passes the target policy of targets.ts (https only,
 * public addresses only unless the registry itself is private).
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { Errors, isAppError } from 'lia/plugin';
import { LargeReadAgent } from './large-reads.js';
import { TargetPolicy } from './targets.js';

/** One request to send. */
export interface HttpRequest {
  method: string;
  url: URL;
  headers?: Record<string, string>;
  /** A buffer, or a stream whose length is in `headers['content-length']`. */
  body?: Buffer | Readable;
  signal?: AbortSignal;
  /** The registry URL this request serves; other hosts face the target policy. Defaults to `url`. */
  origin?: URL;
}

/** A response whose body is still to be read (or resumed to discard it). */
export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The URL that answered, after redirects. */
  url: URL;
  /** True when a redirect led to another host than the registry's (its answer is not the registry's). */
  redirected: boolean;
  body: IncomingMessage;
}

/** Options of {@link HttpClient}. */
export interface HttpClientOptions {
  /** Limit for connecting and for the response head, and for a stalled body. Defaults to 30 s. */
  timeoutMs?: number;
  /** PEM file of extra trusted CAs for HTTPS. Defaults to none (the system store only). */
  caFile?: string;
  /** Follow redirects and token realms to private addresses from a public registry too. Defaults to false. */
  allowPrivateTargets?: boolean;
}

const MAX_REDIRECTS = 10;

/** Names a low-level failure so the user can act on it. */
function networkError(err: NodeJS.ErrnoException, url: URL): Error {
  const where = url.host;
  switch (err.code) {
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return Errors.badRequest(`registry host "${url.hostname}" is unknown (DNS lookup failed)`, { cause: err });
    case 'ECONNREFUSED':
      return Errors.badGateway(`cannot connect to registry ${where}: connection refused`, { cause: err });
    case 'LIA_PRIVATE':
      return Errors.badGateway(`registry target ${where} is a private address, which a public registry may not send the appliance to`, { cause: err });
    case 'ETIMEDOUT':
    case 'LIA_TIMEOUT':
      return Errors.timeout(`registry ${where} did not answer in time`, { cause: err });
    case 'EPROTO':
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      return Errors.badGateway(`TLS handshake with registry ${where} failed (is it plain HTTP? then pull with "insecure": true)`, { cause: err });
    default:
      if (err.code?.startsWith('ERR_TLS') || err.code?.includes('CERT') || err.code === 'DEPTH_ZERO_SELF_SIGNED_CERT') {
        return Errors.badGateway(`registry ${where} has a certificate that is not trusted (${err.code}); configure its CA with LIA_REGISTRY_CA`, {
          cause: err,
        });
      }
      return Errors.badGateway(`request to registry ${where} failed: ${err.code ?? err.message}`, { cause: err });
  }
}

/**
 * The error for a body that failed while it streamed: a stall (no byte for the time limit) is a
 * 504, anything else a 502; an error that already has a status keeps it.
 */
export function bodyError(err: unknown, host: string, what: string): Error {
  if (isAppError(err)) return err;
  const e = err as NodeJS.ErrnoException;
  if (e?.code === 'LIA_STALL') return Errors.timeout(`${what}: ${e.message}`, { cause: err });
  return Errors.badGateway(`${what}: the connection to registry ${host} failed: ${e?.message || e?.code || 'unknown error'}`, { cause: err });
}

/** Sends registry requests over keep-alive agents (one for HTTP, one for HTTPS). */
export class HttpClient {
  readonly timeoutMs: number;
  readonly policy: TargetPolicy;
  readonly #http = new LargeReadAgent({ keepAlive: true, maxSockets: 32 });
  readonly #https: https.Agent;
  readonly #ca: string[] | undefined;

  constructor(options: HttpClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const ca = options.caFile ? [...tls.rootCertificates, readFileSync(options.caFile, 'utf8')] : undefined;
    this.#ca = ca;
    this.#https = new https.Agent({ keepAlive: true, maxSockets: 32, ca });
    this.policy = new TargetPolicy(options.allowPrivateTargets ?? false);
  }

  /**
   * Sends one request, following redirects (a cross-host hop drops `Authorization`). A URL on
   * another host than `req.origin` must pass the target policy; a refused one is a 502.
   */
  async send(req: HttpRequest): Promise<HttpResponse> {
    const origin = req.origin ?? req.url;
    let url = req.url;
    let headers = { ...req.headers };
    let method = req.method;
    let body = req.body;
    for (let hop = 0; ; hop++) {
      const what = hop === 0 ? 'token realm' : 'redirect';
      const foreign = url.host !== origin.host;
      if (url !== origin) this.policy.checkScheme(url, origin, what);
      const guard = foreign ? await this.policy.check(url, origin, what) : undefined;
      const res = await this.#once({ ...req, url, headers, method, body }, guard);
      res.redirected = foreign;
      const location = res.headers.location;
      if (![301, 302, 303, 307, 308].includes(res.status) || !location) return res;
      res.body.resume();
      if (hop >= MAX_REDIRECTS) throw Errors.badGateway(`registry ${req.url.host} redirected more than ${MAX_REDIRECTS} times`);
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw Errors.badGateway(`registry ${url.host} redirected to something that is not a URL`);
      }
      if (next.host !== url.host || next.protocol !== url.protocol) {
        const { authorization: _drop, ...rest } = headers;
        headers = rest;
      }
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      url = next;
    }
  }

  #once(req: HttpRequest, guard?: LookupFunction): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      if (req.signal?.aborted) return reject(req.signal.reason);
      const isHttps = req.url.protocol === 'https:';
      const headers: Record<string, string> = { 'user-agent': 'lia-model-store', ...req.headers };
      if (Buffer.isBuffer(req.body)) headers['content-length'] = String(req.body.length);
      const client = (isHttps ? https : http).request(req.url, {
        method: req.method,
        headers,
        agent: isHttps ? this.#https : this.#http,
        // A foreign host of a public registry connects only to the public addresses it resolves to.
        // (A connection of its own: a pooled socket may lead to an address the guard never saw.)
        ...(guard ? { lookup: guard, agent: false as const, ...(isHttps && this.#ca ? { ca: this.#ca } : {}) } : {}),
      });
      let settled = false;
      const fail = (err: unknown): void => {
        if (settled) return;
        settled = true;
        cleanup();
        detach();
        const e = err as NodeJS.ErrnoException;
        reject(req.signal?.aborted ? req.signal.reason : e?.code ? networkError(e, req.url) : err);
      };
      const headTimer = setTimeout(() => {
        const e = Object.assign(new Error('timeout'), { code: 'LIA_TIMEOUT' });
        client.destroy(e);
      }, this.timeoutMs);
      const onAbort = (): void => {
        client.destroy(req.signal?.reason as Error);
      };
      const cleanup = (): void => {
        clearTimeout(headTimer);
      };
      const detach = (): void => req.signal?.removeEventListener('abort', onAbort);
      req.signal?.addEventListener('abort', onAbort, { once: true });
      client.on('error', fail);
      client.on('response', (res) => {
        settled = true;
        cleanup();
        // A stalled body (no byte for timeoutMs) fails the consumer's read.
        const stall = `registry ${req.url.host} stopped sending for ${this.timeoutMs / 1000} s`;
        res.setTimeout(this.timeoutMs, () => res.destroy(Object.assign(new Error(stall), { code: 'LIA_STALL' })));
        res.once('close', detach);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, url: req.url, redirected: false, body: res });
      });
      if (req.body === undefined) client.end();
      else if (Buffer.isBuffer(req.body)) client.end(req.body);
      else {
        req.body.on('error', (err) => client.destroy(err));
        req.body.pipe(client);
      }
    });
  }

  /** Reads a whole (small) body, with a size limit so a hostile registry cannot exhaust memory. */
  static async text(res: HttpResponse, limit = 32 * 1024 * 1024): Promise<string> {
    const bytes = await HttpClient.bytes(res, limit, `more than ${limit} bytes where a small document was expected`);
    return bytes.toString('utf8');
  }

  /**
   * Reads a whole body of at most `limit` bytes; past it the response is dropped and the error
   * says the registry sent `tooMuch`. `progress` hears the bytes received so far.
   */
  static async bytes(res: HttpResponse, limit: number, tooMuch: string, progress?: (received: number) => void): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > limit) {
          res.body.destroy();
          throw Errors.badGateway(`registry ${res.url.host} sent ${tooMuch}`);
        }
        chunks.push(chunk as Buffer);
        progress?.(size);
      }
    } catch (err) {
      throw bodyError(err, res.url.host, 'reading an answer');
    }
    return Buffer.concat(chunks);
  }

  close(): void {
    this.#http.destroy();
    this.#https.destroy();
  }
}
