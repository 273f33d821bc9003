/**
 * The CLI's HTTPS client for a running appliance. It trusts the appliance's CA (never skips
 * verification) and sends the master key as a Bearer token.
 *
 * Where things come from, first match wins:
 * - URL: `--url`, `LIA_URL`, else `https://localhost:<LIA_PORT or 8443>`;
 * - key: `LIA_API_KEY`, else the key file `<data dir>/keys/master.key`;
 * - CA: `LIA_CA_CERT` (a PEM file), else `<data dir>/pki/root.crt`.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { STATUS_CODES } from 'node:http';
import { fetch, Pool, type Dispatcher, type Response } from 'undici';
import { CliError } from './types.js';

export interface ApiClientOptions {
  url: string;
  key: string | null;
  ca: string;
}

export interface ApiClient {
  readonly url: string;
  /** Sends a request; JSON bodies are encoded. Resolves with the raw response. */
  request(method: string, path: string, body?: unknown, init?: { signal?: AbortSignal; headers?: Record<string, string> }): Promise<Response>;
  /** Sends a request and returns the JSON body; a non-2xx answer becomes a CliError with the server's message. */
  json<T>(method: string, path: string, body?: unknown): Promise<T>;
  /** Sends a request and yields each NDJSON line as an object; an `{"error"}` line throws. */
  stream<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): AsyncGenerator<T>;
}

/** Turns an error response into a CliError carrying the server's message. */
export async function responseError(res: Response): Promise<CliError> {
  return errorFromText(res.status, await res.text(), res.statusText);
}

function errorFromText(status: number, text: string, statusText = ''): CliError {
  let message = text;
  try {
    const body = JSON.parse(text) as { error?: string | { message?: string } };
    message = typeof body.error === 'string' ? body.error : (body.error?.message ?? text);
  } catch {
    // not JSON: keep the text
  }
  return new CliError(`${status} ${message || statusText}`);
}

export function createApiClient(options: ApiClientOptions): ApiClient {
  const base = options.url.replace(/\/+$/, '');
  // A Pool, not an Agent: the client talks to one origin, and undici 7's Agent loses its pool once
  // a connection closes, after which every request opens a new TLS connection
  // (bench/lib/connections.ts). A chat in `lia run` sends one request per turn.
  const dispatcher = new Pool(new URL(base).origin, { connect: { ca: options.ca }, bodyTimeout: 0, headersTimeout: 0 });
  const basePath = new URL(base).pathname.replace(/\/+$/, '');
  // fetch wraps the network error in a TypeError's `cause`; undici's request API throws it as it is.
  const unreachable = (err: unknown): CliError => {
    const cause = ((err as { cause?: unknown }).cause ?? err) as { code?: string; message?: string };
    return new CliError(`cannot reach ${base}: ${cause.code ?? cause.message ?? String(err)}`);
  };
  const auth: Record<string, string> = options.key ? { authorization: `Bearer ${options.key}` } : {};
  const request: ApiClient['request'] = async (method, path, body, init = {}) => {
    const headers: Record<string, string> = { ...init.headers, ...auth };
    if (body !== undefined) headers['content-type'] ??= 'application/json';
    // A stream (a file being uploaded as a blob) is sent as it is read, never buffered.
    const streaming = typeof body === 'object' && body !== null && !(body instanceof Uint8Array) && Symbol.asyncIterator in body;
    try {
      return await fetch(base + path, {
        method,
        headers,
        body: body === undefined ? undefined : typeof body === 'string' || body instanceof Uint8Array || streaming ? (body as string) : JSON.stringify(body),
        dispatcher,
        signal: init.signal,
        ...(streaming ? { duplex: 'half' as const } : {}),
      });
    } catch (err) {
      throw unreachable(err);
    }
  };
  return {
    url: base,
    request,
    // undici's own request API rather than fetch: a JSON round trip then costs less than half the
    // CPU (no WHATWG Request, Headers and streams), which the device console pays every refresh.
    async json<T>(method: string, path: string, body?: unknown): Promise<T> {
      let res: Dispatcher.ResponseData;
      try {
        res = await dispatcher.request({
          method: method,
          path: basePath + path,
          headers: body === undefined ? auth : { ...auth, 'content-type': 'application/json' },
          ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
        });
      } catch (err) {
        throw unreachable(err);
      }
      const text = await res.body.text();
      if (res.statusCode < 200 || res.statusCode > 299) throw errorFromText(res.statusCode, text, STATUS_CODES[res.statusCode]);
      return (text ? JSON.parse(text) : {}) as T;
    },
    async *stream<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): AsyncGenerator<T> {
      const res = await request(method, path, body, { signal });
      if (!res.ok || !res.body) throw await responseError(res);
      const decoder = new TextDecoder();
      let buffer = '';
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (!line) continue;
          const obj = JSON.parse(line) as T & { error?: string };
          if (typeof obj.error === 'string') throw new CliError(obj.error);
          yield obj as Awaited<T>;
        }
      }
    },
  };
}

/** Builds the client from flags and the environment, reading the key and CA files. */
export async function clientFromEnv(env: NodeJS.ProcessEnv, dataDir: string, url?: string): Promise<ApiClient> {
  const target = url ?? env['LIA_URL'] ?? `https://localhost:${env['LIA_PORT'] ?? '8443'}`;
  const caFile = env['LIA_CA_CERT'] ?? `${dataDir}/pki/root.crt`;
  const ca = await readFile(caFile, 'utf8').catch(() => {
    throw new CliError(`cannot read the CA certificate ${caFile}: download it with "curl -k ${target}/system/ca-cert -o ca.crt" and set LIA_CA_CERT=ca.crt`);
  });
  const key =
    env['LIA_API_KEY'] ??
    (await readFile(`${dataDir}/keys/master.key`, 'utf8')
      .then((k) => k.trim())
      .catch(() => null));
  return createApiClient({ url: target, key, ca });
}
