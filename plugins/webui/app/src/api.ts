/**
 * The console's only way to the appliance: the public APIs (`/api`, `/v1`, `/system`) with the
 * user's key as a Bearer token, exactly as a script would call them. Errors come back as
 * `ApiError`s carrying the HTTP status and the server's message; a 401 also tells the app to
 * return to sign-in.
 */
import { getKey } from './auth';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** For a 403: the scope the server says is missing. */
    readonly scope: string | null = null,
  ) {
    super(message);
  }
  /** True when the appliance could not be reached at all. */
  get unreachable(): boolean {
    return this.status === 0;
  }
}

type Listener = (reason: string) => void;
const unauthorizedListeners = new Set<Listener>();

/** Called with the server's reason whenever a request answers 401 (key rotated, revoked, wrong). */
export function onUnauthorized(listener: Listener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

function messageOf(body: unknown, status: number): string {
  if (body && typeof body === 'object' && 'error' in body) {
    const e = (body as { error: unknown }).error;
    if (typeof e === 'string') return e;
    if (e && typeof e === 'object' && 'message' in e) return String((e as { message: unknown }).message);
  }
  return `the appliance answered HTTP ${status}`;
}

async function toError(res: Response, notify: boolean): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  const message = body === null && res.status === 404 ? 'not found' : messageOf(body, res.status);
  const scope = res.status === 403 ? (/scope "([^"]+)"/.exec(message)?.[1] ?? null) : null;
  const err = new ApiError(res.status, message, scope);
  if (res.status === 401 && notify) for (const l of unauthorizedListeners) l(message);
  return err;
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
  /** Send without the key (public routes). */
  anonymous?: boolean;
  /** Send this key instead of the stored one (sign-in checks a key before keeping it). */
  key?: string;
}

/** Sends a request; resolves to the Response when it is 2xx, else throws an ApiError. */
export async function request(path: string, options: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = {};
  const key = options.key ?? getKey();
  if (!options.anonymous && key) headers.Authorization = `Bearer ${key}`;
  let body: BodyInit | undefined;
  // A Blob goes as it is; FormData as multipart, the browser writing its boundary.
  if (options.body instanceof Blob || options.body instanceof FormData) body = options.body;
  else if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  let res: Response;
  try {
    res = await fetch(path, { method: options.method ?? (body ? 'POST' : 'GET'), headers, body, signal: options.signal, cache: 'no-store' });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'the appliance cannot be reached: check that it is running and on the network');
  }
  // A key being tried at sign-in is not a session that ended: no sign-out on its 401.
  if (!res.ok) throw await toError(res, options.key === undefined);
  return res;
}

/** A JSON request; resolves to the parsed body (an empty body is `{}`). */
export async function json<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const res = await request(path, options);
  const text = await res.text();
  return (text ? JSON.parse(text) : {}) as T;
}

/**
 * Reads an NDJSON stream (Ollama's `/api/chat`, `/api/pull`), calling `onLine` with each object.
 * A line carrying `error` ends the stream with an ApiError.
 */
export async function ndjson<T>(path: string, body: unknown, onLine: (line: T) => void, signal?: AbortSignal): Promise<void> {
  const res = await request(path, { body, signal });
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffered += value;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl).trim();
      buffered = buffered.slice(nl + 1);
      if (!line) continue;
      const parsed = JSON.parse(line) as T & { error?: string };
      if (typeof parsed.error === 'string') throw new ApiError(500, parsed.error);
      onLine(parsed);
    }
  }
  if (buffered.trim()) onLine(JSON.parse(buffered) as T);
}
