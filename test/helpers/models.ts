/**
 * Puts a model fixture into a test appliance the way a user would: upload the blob(s) with
 * `POST /api/blobs/:digest`, then `POST /api/create` over the real HTTPS API.
 *
 * @example
 * ```ts
 * await createModel(app, 'stories', 'gguf/stories260K.gguf')
 * await createModel(app, 'minilm', 'onnx/tiny-random-minilm')
 * ```
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { fixture } from './fixtures.js';
import type { TestAppliance } from './appliance.js';

/** Extra fields of the create request. */
export interface CreateExtra {
  template?: string;
  system?: string;
  parameters?: Record<string, unknown>;
  license?: string | string[];
  messages?: Array<{ role: string; content: string }>;
}

const digests = new Map<string, string>();

/** `sha256:<hex>` of a file (cached per path for the test run). */
export async function fileDigest(file: string): Promise<string> {
  const cached = digests.get(file);
  if (cached) return cached;
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  const digest = `sha256:${hash.digest('hex')}`;
  digests.set(file, digest);
  return digest;
}

/** Every file under `dir`, as forward-slash relative paths. */
async function listFiles(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await listFiles(dir, rel)));
    else if (e.isFile()) out.push(rel);
  }
  return out;
}

/** Uploads one file as a blob (no-op when the appliance has it); returns its digest. */
export async function uploadBlob(app: Pick<TestAppliance, 'fetch'>, file: string): Promise<string> {
  const digest = await fileDigest(file);
  const head = await app.fetch(`/api/blobs/${digest}`, { method: 'HEAD' });
  if (head.status === 200) return digest;
  const init: Parameters<TestAppliance['fetch']>[1] = {
    method: 'POST',
    body: createReadStream(file) as unknown as ReadableStream,
    duplex: 'half',
    headers: { 'content-type': 'application/octet-stream' },
  };
  const res = await app.fetch(`/api/blobs/${digest}`, init);
  if (res.status !== 201 && res.status !== 200) throw new Error(`uploading ${file} failed: ${res.status} ${await res.text()}`);
  await res.arrayBuffer().catch(() => undefined);
  return digest;
}

/**
 * Creates model `name` from a fixture (`gguf/<file>.gguf` or an `onnx/<folder>` of the shared
 * models, or the absolute path of a built one) and returns the
 * create request's final status line. Throws with the server's message when anything fails.
 */
export async function createModel(app: Pick<TestAppliance, 'fetch'>, name: string, fixtureName: string, extra: CreateExtra = {}): Promise<void> {
  // An absolute path is a built fixture (scripts/fixtures: `.cache/fixtures/...`), used as it is.
  const source = path.isAbsolute(fixtureName) ? fixtureName : fixture(fixtureName);
  const files: Record<string, string> = {};
  if ((await stat(source)).isDirectory()) {
    for (const rel of await listFiles(source)) files[rel] = await uploadBlob(app, path.join(source, rel));
  } else {
    files[path.basename(source)] = await uploadBlob(app, source);
  }
  const res = await app.fetch('/api/create', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: name, files, stream: false, ...extra }),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`creating ${name} from ${fixtureName} failed: ${res.status} ${text}`);
}

/** POSTs `body` as JSON to `route`; the status and the answer, parsed when it is JSON (else its text). */
export async function postJson(app: Pick<TestAppliance, 'fetch'>, route: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await app.fetch(route, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  try {
    return { status: res.status, json: JSON.parse(text) };
  } catch {
    return { status: res.status, json: text };
  }
}
