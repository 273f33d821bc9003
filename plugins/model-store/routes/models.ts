/**
 * The local model routes: `GET|HEAD /api/tags`, `POST /api/show`, `POST /api/copy`,
 * `DELETE /api/delete`, and the OpenAI listing `GET /v1/models`, `GET /v1/models/{id}`.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Errors } from 'lia/plugin';
import { renderModelfile, renderParameters } from '../modelfile/render.js';
import { displayName } from '../store/names.js';
import type { ModelStoreService } from '../store/store.js';
import { modelField, objectBody, optBool, optString } from './body.js';

/** RFC 3339 with the local offset, as Go prints a file's mtime. */
function localTime(d: Date): string {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const hh = String(Math.floor(Math.abs(off) / 60)).padStart(2, '0');
  const mm = String(Math.abs(off) % 60).padStart(2, '0');
  const local = new Date(d.getTime() + off * 60_000).toISOString().replace('Z', '');
  return `${local}${sign}${hh}:${mm}`;
}

/** The owner OpenAI clients see: the namespace, as Ollama reports it. */
function owner(name: { namespace: string }): string {
  return name.namespace;
}

/** Registers tags, show, copy, delete and the OpenAI model listing. */
export function registerModelRoutes(app: FastifyInstance, store: ModelStoreService): void {
  const tags = async () => {
    const manifests = await store.manifests();
    const models = await Promise.all(
      manifests.map(async (m) => {
        const details = await store.describer.details(m).catch(() => null);
        if (!details) return null;
        const name = displayName(m.name);
        return { name, model: name, modified_at: localTime(m.modifiedAt), size: m.size, digest: m.digest, details };
      }),
    );
    return { models: models.filter((m) => m !== null) };
  };
  app.get('/api/tags', { config: { scope: 'models:read' } }, tags);

  app.post('/api/show', { config: { scope: 'models:read' } }, async (request) => {
    const body = objectBody(request.body);
    const verbose = optBool(body, 'verbose') ?? false;
    const view = await store.view(modelField(body), { verbose });
    const resolved = await store.toResolved(view);
    const name = displayName(view.stored.name);
    const license = view.licenses.join('\n');
    const parameters = renderParameters(view.parameters);
    return {
      ...(license ? { license } : {}),
      modelfile: renderModelfile({ name, from: resolved.modelPath, ...view }),
      ...(parameters ? { parameters } : {}),
      ...(view.template !== undefined ? { template: view.template } : {}),
      ...(view.system !== undefined ? { system: view.system } : {}),
      details: view.details,
      ...(view.messages.length > 0 ? { messages: view.messages } : {}),
      model_info: view.modelInfo,
      capabilities: view.capabilities,
      modified_at: localTime(view.stored.modifiedAt),
    };
  });

  app.post('/api/copy', { config: { scope: 'models:write' } }, async (request, reply) => {
    const body = objectBody(request.body);
    const source = optString(body, 'source');
    const destination = optString(body, 'destination');
    if (!source) throw Errors.badRequest('source is required', { param: 'source' });
    if (!destination) throw Errors.badRequest('destination is required', { param: 'destination' });
    await store.copy(source, destination);
    return reply.code(200).send();
  });

  app.delete('/api/delete', { config: { scope: 'models:write' } }, async (request, reply) => {
    await store.delete(modelField(objectBody(request.body)));
    return reply.code(200).send();
  });

  /** OpenAI's `Model` object; the response schemas also make the serialiser's work cheap. */
  const Model = Type.Object({ id: Type.String(), object: Type.Literal('model'), created: Type.Integer(), owned_by: Type.String() });
  const openaiModel = (m: { name: Parameters<typeof displayName>[0]; modifiedAt: Date }) => ({
    id: displayName(m.name),
    object: 'model' as const,
    created: Math.floor(m.modifiedAt.getTime() / 1000),
    owned_by: owner(m.name),
  });

  const modelList = { response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Model) }) } };
  app.get('/v1/models', { schema: modelList, config: { scope: 'models:read' } }, async () => ({ object: 'list', data: (await store.manifests()).map(openaiModel) }));

  // A wildcard, so ids with a raw slash (`user/model:tag`) match as well as percent-encoded ones.
  const oneModel = { params: Type.Object({ '*': Type.String() }), response: { 200: Model } };
  app.get('/v1/models/*', { schema: oneModel, config: { scope: 'models:read' } }, async (request) => {
    const raw = (request.params as { '*': string })['*'];
    let id: string;
    try {
      id = decodeURIComponent(raw);
    } catch {
      throw Errors.badRequest('the model id is not valid percent-encoding', { param: 'model' });
    }
    return openaiModel(await store.get(id));
  });
}
