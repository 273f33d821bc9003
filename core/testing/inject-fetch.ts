/**
 * `fetch` without a socket: a WHATWG request turned into Fastify's `app.inject()`, and its answer
 * turned back into a WHATWG `Response`, so a test reads the same whether the appliance listens or
 * not. The request goes through undici's `Request` first, so the body and its `content-type` are
 * encoded exactly as `fetch` encodes them (strings, JSON, `FormData`, streams). The answer's body
 * streams as the route writes it (`payloadAsStream`), so reading an SSE or NDJSON stream chunk by
 * chunk works. As undici's `fetch` does, it sends `accept`, `accept-language`, `user-agent` and
 * `accept-encoding: br, gzip, deflate` unless the request has them, decodes a compressed body
 * (keeping its `content-encoding` header), and follows redirects unless `redirect` says otherwise.
 *
 * What it cannot show is the connection: the peer is always 127.0.0.1, there is no TLS, and
 * cancelling the body does not close the request on the server side.
 *
 * @module
 */
import { Readable, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { FastifyInstance } from 'fastify';
import { Headers, Request, Response, type RequestInit } from 'undici';

/** Statuses whose response has no body (the `Response` constructor refuses one). */
const NULL_BODY = new Set([101, 103, 204, 205, 304]);
const REDIRECT = new Set([301, 302, 303, 307, 308]);
/** `fetch`'s own limit on redirects followed. */
const MAX_REDIRECTS = 20;
/** The origin relative paths resolve against; its host is what a browser on the box would send. */
const ORIGIN = 'https://localhost';

/** Sends `pathname` (relative to the appliance) to `app` through `inject()`. */
export async function injectFetch(app: FastifyInstance, pathname: string, init: RequestInit = {}): Promise<Response> {
  let request = new Request(new URL(pathname, ORIGIN), init);
  for (let hop = 0; ; hop++) {
    const res = await injectOnce(app, request);
    const location = res.headers.get('location');
    if (!REDIRECT.has(res.status) || !location || request.redirect === 'manual') return res;
    if (request.redirect === 'error') throw new TypeError(`fetch failed: redirect to ${location} with redirect: "error"`);
    if (hop >= MAX_REDIRECTS) throw new TypeError('fetch failed: too many redirects');
    await res.body?.cancel();
    const target = new URL(location, request.url);
    if (target.origin !== ORIGIN) throw new TypeError(`fetch failed: a redirect out of the appliance (${location}) cannot be injected`);
    // As fetch does: 303, and 301/302 after a POST, become a GET without a body.
    const toGet = res.status === 303 || ((res.status === 301 || res.status === 302) && request.method === 'POST');
    const headers = new Headers(request.headers);
    if (toGet) for (const name of ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location']) headers.delete(name);
    request = new Request(target, {
      method: toGet ? (request.method === 'HEAD' ? 'HEAD' : 'GET') : request.method,
      headers,
      body: toGet ? null : await request.clone().arrayBuffer(),
      redirect: request.redirect,
      signal: request.signal,
    });
  }
}

async function injectOnce(app: FastifyInstance, request: Request): Promise<Response> {
  const headers: Record<string, string> = { host: 'localhost', accept: '*/*', 'accept-language': '*', 'user-agent': 'undici' };
  headers['accept-encoding'] = request.headers.has('range') ? 'identity' : 'br, gzip, deflate';
  request.headers.forEach((value, name) => (headers[name] = value));
  const hasBody = request.method !== 'GET' && request.method !== 'HEAD';
  const payload = hasBody ? Buffer.from(await request.clone().arrayBuffer()) : undefined;
  const url = new URL(request.url);
  const res = await app.inject({
    method: request.method as 'GET',
    url: url.pathname + url.search,
    headers,
    ...(payload && payload.length > 0 ? { payload } : {}),
    signal: request.signal,
    payloadAsStream: true,
  });
  const responseHeaders = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, String(v));
  }
  const noBody = NULL_BODY.has(res.statusCode) || request.method === 'HEAD';
  const stream = res.stream();
  if (noBody) stream.resume();
  const decoded = noBody ? null : decode(stream, responseHeaders.get('content-encoding'));
  const body = decoded ? (Readable.toWeb(decoded) as NodeReadableStream<Uint8Array>) : null;
  return new Response(body as ConstructorParameters<typeof Response>[0], { status: res.statusCode, statusText: res.statusMessage, headers: responseHeaders });
}

/** The body with its content codings undone, as `fetch` undoes them; unknown codings are left as sent. */
function decode(stream: Readable, encoding: string | null): Readable {
  const decoders: Transform[] = [];
  for (const coding of (encoding ?? '')
    .toLowerCase()
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean)
    .reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip')
      decoders.push(zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    else if (coding === 'deflate') decoders.push(zlib.createInflate({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    else if (coding === 'br')
      decoders.push(zlib.createBrotliDecompress({ flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH }));
    else return stream;
  }
  let out = stream;
  for (const d of decoders) {
    out.on('error', (err) => d.destroy(err));
    out = out.pipe(d);
  }
  return out;
}
