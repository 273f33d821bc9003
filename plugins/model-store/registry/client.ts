/**
 * The OCI distribution (v2) client: manifests, blobs and uploads on registry.ollama.ai or any
 * ordinary registry, with Bearer-token challenges answered from `WWW-Authenticate` (tokens are
 * cached per registry and scope) and `insecure` meaning plain HTTP, as in Ollama.
 *
 * @module
 */
import type { Readable } from 'node:stream';
import { Errors } from 'lia/plugin';
import { MANIFEST_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE, parseManifest, type Manifest } from '../store/manifest.js';
import type { ModelName } from '../store/names.js';
import { HttpClient, type HttpClientOptions, type HttpResponse } from './http.js';

/** Where a name lives on its registry. */
export interface Repository {
  name: ModelName;
  /** Use plain HTTP (`"insecure": true`). */
  insecure: boolean;
}

/** Parses `Bearer realm="..",service="..",scope=".."`; null for other schemes. */
export function parseChallenge(header: string | undefined): { realm: string; params: Record<string, string> } | null {
  if (!header || !/^bearer\s/i.test(header)) return null;
  const params: Record<string, string> = {};
  for (const m of header.slice(7).matchAll(/([a-zA-Z_]+)="([^"]*)"|([a-zA-Z_]+)=([^,\s]*)/g)) {
    params[(m[1] ?? m[3])!.toLowerCase()] = m[2] ?? m[4] ?? '';
  }
  const realm = params['realm'];
  if (!realm) return null;
  delete params['realm'];
  return { realm, params };
}

/**
 * `scheme://host/v2/namespace/model` of a repository. A name written with `http://` needs
 * `insecure` (as in Ollama); without it this is a 400.
 */
export function repositoryUrl(repo: Repository): string {
  const { name } = repo;
  if (name.scheme === 'http' && !repo.insecure) throw Errors.badRequest('insecure protocol http: set "insecure": true to use a plain HTTP registry');
  const url = `${repo.insecure ? 'http' : 'https'}://${name.host}/v2/${name.namespace}/${name.model}`;
  // The name grammar allows ":" and "." freely in a host; a URL does not (`127.0.s.1`, `a:b:c`).
  if (!URL.canParse(url))
    throw Errors.badRequest(`"${name.host}" is not a valid registry host (a host name or address, and an optional port)`, { param: 'model' });
  return url;
}

/** Talks to OCI registries for the puller and the pusher. */
export class RegistryClient {
  readonly http: HttpClient;
  readonly #tokens = new Map<string, string>();

  constructor(options: HttpClientOptions = {}) {
    this.http = new HttpClient(options);
  }

  /** `scheme://host/v2/namespace/model`. */
  base(repo: Repository): string {
    return repositoryUrl(repo);
  }

  /**
   * Sends a request to the registry, answering one Bearer challenge: on a 401 it fetches a token
   * from the realm (anonymously) and retries once with it.
   */
  async send(
    repo: Repository,
    method: string,
    url: string,
    init: { headers?: Record<string, string>; body?: Buffer | (() => Readable); signal?: AbortSignal } = {},
  ): Promise<HttpResponse> {
    const key = `${repo.name.host}/${repo.name.namespace}/${repo.name.model}`;
    const attempt = (token?: string): Promise<HttpResponse> =>
      this.http.send({
        method,
        url: new URL(url),
        headers: { ...init.headers, ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: typeof init.body === 'function' ? init.body() : init.body,
        signal: init.signal,
      });
    let res = await attempt(this.#tokens.get(key));
    if (res.status !== 401) return res;
    const challenge = parseChallenge(res.headers['www-authenticate']);
    res.body.resume();
    if (!challenge) throw Errors.badGateway(`registry ${repo.name.host} requires authentication (401) and offers no Bearer token service`);
    const token = await this.#fetchToken(challenge, new URL(url), init.signal);
    this.#tokens.set(key, token);
    res = await attempt(token);
    if (res.status === 401) {
      res.body.resume();
      throw Errors.badGateway(`registry ${repo.name.host} denied access: unauthorized`);
    }
    return res;
  }

  /** Fetches a token from the challenge's realm, which must pass the redirect policy relative to the registry (`origin`). */
  async #fetchToken(challenge: { realm: string; params: Record<string, string> }, origin: URL, signal?: AbortSignal): Promise<string> {
    let url: URL;
    try {
      url = new URL(challenge.realm);
    } catch {
      throw Errors.badGateway(`registry token realm "${challenge.realm}" is not a URL`);
    }
    for (const [k, v] of Object.entries(challenge.params)) url.searchParams.set(k, v);
    const res = await this.http.send({ method: 'GET', url, signal, origin });
    const text = await HttpClient.text(res, 1024 * 1024);
    if (res.status !== 200) throw Errors.badGateway(`registry token service ${url.host} answered ${res.status}`);
    try {
      const body = JSON.parse(text) as { token?: string; access_token?: string };
      const token = body.token ?? body.access_token;
      if (typeof token === 'string' && token) return token;
    } catch {
      // falls through
    }
    throw Errors.badGateway(`registry token service ${url.host} sent no token`);
  }

  /**
   * Fails with a clear error for a non-2xx answer, naming the status and the host. When the
   * registry itself answered, its OCI error (`MANIFEST_UNKNOWN: ...`) is quoted, shortened; the
   * answer of a server a redirect led to is never quoted, since the user never chose that server
   * (an internal page must not come back in an error message).
   */
  async expectOk(res: HttpResponse, what: string): Promise<void> {
    if (res.status >= 200 && res.status < 300) return;
    const text = await HttpClient.text(res, 64 * 1024).catch(() => '');
    let detail = '';
    if (!res.redirected) {
      try {
        const first = (JSON.parse(text) as { errors?: Array<{ code?: unknown; message?: unknown }> }).errors?.[0];
        const code = typeof first?.code === 'string' ? first.code : '';
        const message = typeof first?.message === 'string' ? first.message : '';
        detail = `${code}${code && message ? ': ' : ''}${message}`.replace(/[\u0000-\u001f]+/g, ' ').slice(0, 200);
      } catch {
        // not an OCI error body: status and host only
      }
    }
    throw Errors.badGateway(
      `${what}: ${res.redirected ? `${res.url.host}, where the registry redirected,` : `registry ${res.url.host}`} answered ${res.status}${detail ? ` (${detail})` : ''}`,
    );
  }

  /** Fetches a manifest; returns its bytes exactly as received (they are stored as they are). */
  async getManifest(repo: Repository, signal?: AbortSignal): Promise<{ bytes: Buffer; manifest: Manifest }> {
    const url = `${this.base(repo)}/manifests/${repo.name.tag}`;
    const res = await this.send(repo, 'GET', url, { headers: { accept: `${MANIFEST_MEDIA_TYPE}, ${OCI_MANIFEST_MEDIA_TYPE}` }, signal });
    if (res.status === 404) {
      res.body.resume();
      throw Errors.modelNotFound(`pull model manifest: model "${repo.name.namespace}/${repo.name.model}:${repo.name.tag}" not found on ${repo.name.host}`);
    }
    await this.expectOk(res, 'pull model manifest');
    const type = String(res.headers['content-type'] ?? '');
    const text = await HttpClient.text(res, 4 * 1024 * 1024);
    const parsed = parseManifest(text);
    if ('problem' in parsed) {
      const what = /html/i.test(type) || /^\s*</.test(text) ? 'an HTML page' : `"${type || 'no content type'}"`;
      throw Errors.badGateway(`pull model manifest: registry ${repo.name.host} answered with ${what}, not a model manifest (${parsed.problem})`);
    }
    return { bytes: Buffer.from(text, 'utf8'), manifest: parsed.manifest };
  }

  /** `GET` a blob, optionally a byte range (`[start, end]` inclusive). */
  getBlob(repo: Repository, digest: string, range?: [number, number], signal?: AbortSignal): Promise<HttpResponse> {
    const headers: Record<string, string> = {};
    if (range) headers['range'] = `bytes=${range[0]}-${range[1]}`;
    return this.send(repo, 'GET', `${this.base(repo)}/blobs/${digest}`, { headers, signal });
  }

  /** True when the registry has the blob. */
  async hasBlob(repo: Repository, digest: string, signal?: AbortSignal): Promise<boolean> {
    const res = await this.send(repo, 'HEAD', `${this.base(repo)}/blobs/${digest}`, { signal });
    res.body.resume();
    if (res.status === 200) return true;
    if (res.status === 404) return false;
    await this.expectOk(res, `check blob ${digest}`);
    return false;
  }

  /** Uploads a blob in one `PUT` (monolithic upload); `open` gives its bytes. */
  async putBlob(repo: Repository, digest: string, size: number, open: () => Readable, signal?: AbortSignal): Promise<void> {
    const start = await this.send(repo, 'POST', `${this.base(repo)}/blobs/uploads/`, { signal });
    start.body.resume();
    await this.expectOk(start, `start upload of ${digest}`);
    const location = start.headers['location'];
    if (!location) throw Errors.badGateway(`registry ${repo.name.host} started an upload without a Location`);
    const url = new URL(location, start.url);
    url.searchParams.set('digest', digest);
    const res = await this.send(repo, 'PUT', url.href, {
      headers: { 'content-type': 'application/octet-stream', 'content-length': String(size) },
      body: open,
      signal,
    });
    await this.expectOk(res, `upload blob ${digest}`);
    res.body.resume();
  }

  /** `PUT` a manifest under the name's tag. */
  async putManifest(repo: Repository, bytes: Buffer, mediaType: string, signal?: AbortSignal): Promise<void> {
    const res = await this.send(repo, 'PUT', `${this.base(repo)}/manifests/${repo.name.tag}`, {
      headers: { 'content-type': mediaType },
      body: bytes,
      signal,
    });
    await this.expectOk(res, 'push manifest');
    res.body.resume();
  }

  close(): void {
    this.http.close();
  }
}
