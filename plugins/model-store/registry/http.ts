/**
 * A small HTTP(S) client for registries on node:http, with what the registry protocol needs and
 * fetch does not give: redirects followed to other hosts without leaking the registry's
 * `Authorization`, a time limit on connecting and on the first byte, a stall limit while a body
 * streams, keep-alive agents with an operator-supplied CA, and the response body as a stream.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';
import tls from 'node:tls';
import { Errors } from 'lia/plugin';
import { LargeReadAgent } from './large-reads.js';

/** One request to send. */
export interface HttpRequest {
  method: string;
  url: URL;
  headers?: Record<string, string>;
  /** A buffer, or a stream whose length is in `headers['content-length']`. */
  body?: Buffer | Readable;
  signal?: AbortSignal;
}

/** A response whose body is still to be read (or resumed to discard it). */
export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  /** The URL that answered, after redirects. */
  url: URL;
  body: IncomingMessage;
}

/** Options of {@link HttpClient}. */
export interface HttpClientOptions {
  /** Limit for connecting and for the response head, and for a stalled body. Defaults to 30 s. */
  timeoutMs?: number;
  /** PEM file of extra trusted CAs for HTTPS. Defaults to none (the system store only). */
  caFile?: string;
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
    case 'ETIMEDOUT':
    case 'LIA_TIMEOUT':
      return Errors.timeout(`registry ${where} did not answer in time`, { cause: err });
    case 'EPROTO':
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      return Errors.badGateway(`TLS handshake with registry ${where} failed (is it plain HTTP? then pull with "insecure": true)`, { cause: err });
    default:
      if (err.code?.startsWith('ERR_TLS') || err.code?.includes('CERT') || err.code === 'DEPTH_ZERO_SELF_SIGNED_CERT') {
        return Errors.badGateway(`registry ${where} has a certificate that is not trusted (${err.code}); configure its CA with LIA_REGISTRY_CA`, { cause: err });
      }
      return Errors.badGateway(`request to registry ${where} failed: ${err.code ?? err.message}`, { cause: err });
  }
}

/** Sends registry requests over keep-alive agents (one for HTTP, one for HTTPS). */
export class HttpClient {
  readonly timeoutMs: number;
  readonly #http = new LargeReadAgent({ keepAlive: true, maxSockets: 32 });
  readonly #https: https.Agent;

  constructor(options: HttpClientOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const ca = options.caFile ? [...tls.rootCertificates, readFileSync(options.caFile, 'utf8')] : undefined;
    this.#https = new https.Agent({ keepAlive: true, maxSockets: 32, ca });
  }

  /** Sends one request, following redirects (a cross-host hop drops `Authorization`). */
  async send(req: HttpRequest): Promise<HttpResponse> {
    let url = req.url;
    let headers = { ...req.headers };
    let method = req.method;
    let body = req.body;
    for (let hop = 0; ; hop++) {
      const res = await this.#once({ ...req, url, headers, method, body });
      const location = res.headers.location;
      if (![301, 302, 303, 307, 308].includes(res.status) || !location) return res;
      res.body.resume();
      if (hop >= MAX_REDIRECTS) throw Errors.badGateway(`registry ${req.url.host} redirected more than ${MAX_REDIRECTS} times`);
      const next = new URL(location, url);
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

  #once(req: HttpRequest): Promise<HttpResponse> {
    return new Promise((resolve, reject) => {
      if (req.signal?.aborted) return reject(req.signal.reason);
      const isHttps = req.url.protocol === 'https:';
      const headers: Record<string, string> = { 'user-agent': 'lia-model-store', ...req.headers };
      if (Buffer.isBuffer(req.body)) headers['content-length'] = String(req.body.length);
      const client = (isHttps ? https : http).request(req.url, {
        method: req.method,
        headers,
        agent: isHttps ? this.#https : this.#http,
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
        res.setTimeout(this.timeoutMs, () => res.destroy(Object.assign(new Error(`registry ${req.url.host} stalled`), { code: 'LIA_STALL' })));
        res.once('close', detach);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, url: req.url, body: res });
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
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > limit) {
        res.body.destroy();
        throw Errors.badGateway(`registry ${res.url.host} sent ${tooMuch}`);
      }
      chunks.push(chunk as Buffer);
      progress?.(size);
    }
    return Buffer.concat(chunks);
  }

  close(): void {
    this.#http.destroy();
    this.#https.destroy();
  }
}
