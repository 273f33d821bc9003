/**
 * `POST /api/create`: a model from uploaded blobs or another model, streaming its progress.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { Errors } from 'lia/plugin';
import type { StoredMessage } from '../public.js';
import { checkModelAllowed } from 'lia/utils';
import { checkCreate, createModel, type CreateSpec } from '../store/create.js';
import { parseName } from '../store/names.js';
import { digestHex, normalizeDigest } from '../store/paths.js';
import type { ModelStoreService } from '../store/store.js';
import { forbiddenBlob } from './blob-access.js';
import { modelField, objectBody, optObject, optString, wantsStream } from './body.js';
import { sendProgress } from './progress.js';

function licenses(v: unknown): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((l) => typeof l === 'string')) return v;
  throw Errors.badRequest('"license" must be a string or an array of strings', { param: 'license' });
}

function isMessage(m: unknown): m is StoredMessage {
  if (typeof m !== 'object' || m === null) return false;
  const { role, content } = m as Record<string, unknown>;
  return typeof role === 'string' && typeof content === 'string';
}

function messages(v: unknown): StoredMessage[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || !v.every(isMessage)) throw Errors.badRequest('"messages" must be an array of {role, content} strings', { param: 'messages' });
  return v.map((m) => ({ role: m.role, content: m.content }));
}

/** Registers `POST /api/create`. */
export function registerCreateRoute(app: FastifyInstance, store: ModelStoreService): void {
  app.post('/api/create', { config: { scope: 'models:write' } }, async (request, reply) => {
    const body = objectBody(request.body);
    if (optString(body, 'quantize') ?? optString(body, 'quantization')) {
      throw Errors.badRequest('quantizing is not supported; upload a GGUF file that is already quantized', { param: 'quantize' });
    }
    const files = optObject(body, 'files') as Record<string, string> | undefined;
    const adapters = optObject(body, 'adapters') as Record<string, string> | undefined;
    // A key's model allow-list: both the new name and the model it is made from.
    checkModelAllowed(modelField(body));
    const from = optString(body, 'from');
    if (from) checkModelAllowed(from, 'from');
    store.refuseRemote(modelField(body), 'create');
    if (from) store.refuseRemote(from, 'copy', 'from');
    const spec: CreateSpec = {
      name: parseName(modelField(body)),
      from: optString(body, 'from'),
      files,
      ...(adapters && Object.keys(adapters).length > 0 ? { adapters } : {}),
      template: optString(body, 'template') ?? (body['template'] === '' ? '' : undefined),
      system: optString(body, 'system') ?? (body['system'] === '' ? '' : undefined),
      parameters: optObject(body, 'parameters'),
      license: licenses(body['license']),
      messages: messages(body['messages']),
    };
    // The blobs named are models' weights too (blob-access.ts); a malformed digest is checkCreate's 400.
    const named = [
      ...Object.entries(files ?? {}).map(([file, d]) => [`files.${file}`, d] as const),
      ...Object.entries(adapters ?? {}).map(([file, d]) => [`adapters.${file}`, d] as const),
    ].flatMap(([field, d]) => (typeof d === 'string' && digestHex(d) ? [[field, normalizeDigest(d), d] as const] : []));
    const forbidden = await forbiddenBlob(
      store,
      named.map(([, d]) => d),
    );
    if (forbidden) {
      const [field, , given] = named.find(([, d]) => d === forbidden)!;
      throw Errors.forbidden(`this API key may not use blob ${given} ("${field}"): it belongs to models outside the key's allow-list; upload the file itself`, {
        param: field.split('.')[0]!,
      });
    }
    await checkCreate(store, spec);
    return sendProgress(reply, wantsStream(body), async (emit) => {
      emit({ status: 'reading model metadata' });
      await createModel(store, spec, emit);
    });
  });
}
