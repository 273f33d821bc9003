/**
 * `GET /v1/models` and `GET /v1/models/{id}`: the store's catalog in OpenAI's `Model` shape. The
 * owner is the name's namespace, as Ollama reports it; `created` is when the model last changed.
 * A key with a model allow-list sees only its models; another model's id is a 404, as if absent.
 * A model with LoRA adapters also carries `parent`, the model it adapts (vLLM's field).
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { Errors, type Hooks } from 'lia/plugin';
import type { CatalogEntry } from 'lia/model-store';
import { principalMayUse, Type } from 'lia/utils';

/**
 * OpenAI's `Model` object; the response schemas also make the serialiser's work cheap. A remote
 * model (served by an upstream engine) also carries `remote_host` and `remote_model`, as `/api/tags`.
 */
const Model = Type.Object({
  id: Type.String(),
  object: Type.Literal('model'),
  created: Type.Integer(),
  owned_by: Type.String(),
  remote_host: Type.Optional(Type.String()),
  remote_model: Type.Optional(Type.String()),
  parent: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});

function openaiModel(m: CatalogEntry) {
  const remote = m.remote ? { remote_host: m.remote.host, remote_model: m.remote.model } : {};
  // A model with LoRA adapters names the model it adapts, as vLLM lists its adapters.
  const parent = m.parent !== undefined ? { parent: m.parent || null } : {};
  return { id: m.name, object: 'model' as const, created: Math.floor(m.modifiedAt.getTime() / 1000), owned_by: m.namespace, ...remote, ...parent };
}

export function modelsRoutes(app: FastifyInstance, hooks: Hooks): void {
  const list = { response: { 200: Type.Object({ object: Type.Literal('list'), data: Type.Array(Model) }) } };
  app.get('/v1/models', { schema: list, config: { scope: 'models:read' } }, async () => ({
    object: 'list' as const,
    data: (await hooks.extensions.get('models').catalog()).filter((m) => principalMayUse(m.name)).map(openaiModel),
  }));

  // A wildcard, so ids with a raw slash (`user/model:tag`) match as well as percent-encoded ones.
  const one = { params: Type.Object({ '*': Type.String() }), response: { 200: Model } };
  app.get('/v1/models/*', { schema: one, config: { scope: 'models:read' } }, async (request) => {
    const raw = (request.params as { '*': string })['*'];
    let id: string;
    try {
      id = decodeURIComponent(raw);
    } catch {
      throw Errors.badRequest('the model id is not valid percent-encoding', { param: 'model' });
    }
    // Outside the key's allow-list a model is answered as absent, before the store is asked.
    if (!principalMayUse(id)) throw Errors.modelNotFound(`model '${id}' not found`, { param: 'model' });
    const entry = await hooks.extensions.get('models').entry(id);
    if (!principalMayUse(entry.name)) throw Errors.modelNotFound(`model '${id}' not found`, { param: 'model' });
    return openaiModel(entry);
  });
}
