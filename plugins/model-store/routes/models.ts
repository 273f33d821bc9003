/**
 * The local model routes: `GET|HEAD /api/tags`, `POST /api/show`, `POST /api/copy`,
 * `DELETE /api/delete` (the OpenAI listing, `/v1/models`, is api-openai's). A model whose weights
 * cannot be described is listed with `details.broken` saying why; showing or loading it is a 4xx.
 * A key's model allow-list holds here too: the listing shows only its models, and every name a
 * request gives is checked before the store is asked (403).
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { Errors } from 'lia/plugin';
import { checkModelAllowed, principalMayUse } from 'lia/utils';
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

/** Registers tags, show, copy and delete. */
export function registerModelRoutes(app: FastifyInstance, store: ModelStoreService): void {
  const tags = async () => {
    const remote = store.remotes();
    const manifests = await store.localManifests(remote);
    const local = await Promise.all(
      manifests.map(async (m) => {
        const details = await store.describer.details(m).catch((err: unknown) => store.describer.brokenDetails(m, err));
        const name = displayName(m.name);
        return { name, model: name, modified_at: localTime(m.modifiedAt), size: m.size, digest: m.digest, details };
      }),
    );
    const remotes = remote.map((m) => ({
      name: m.name,
      model: m.name,
      modified_at: localTime(m.modifiedAt),
      size: 0,
      digest: m.digest,
      details: m.details,
      capabilities: m.capabilities,
      remote_model: m.remote.model,
      remote_host: m.remote.host,
    }));
    // A key with a model allow-list sees only its models.
    return { models: [...remotes, ...local].filter((m) => principalMayUse(m.name)) };
  };
  app.get('/api/tags', { config: { scope: 'models:read' } }, tags);

  app.post('/api/show', { config: { scope: 'models:read' } }, async (request) => {
    const body = objectBody(request.body);
    const verbose = optBool(body, 'verbose') ?? false;
    checkModelAllowed(modelField(body));
    const remote = store.remote(modelField(body));
    if (remote) {
      // What is known of a remote model: no files, so no template, parameters or model_info.
      return {
        modelfile: `# A remote model: ${remote.remote.host} serves it as "${remote.remote.model}".\n`,
        details: remote.details,
        model_info: {},
        capabilities: remote.capabilities,
        modified_at: localTime(remote.modifiedAt),
        remote_model: remote.remote.model,
        remote_host: remote.remote.host,
      };
    }
    const view = await store.view(modelField(body), { verbose });
    const resolved = await store.toResolved(view);
    const name = displayName(view.stored.name);
    const license = view.licenses.join('\n');
    const parameters = renderParameters(view.parameters);
    return {
      ...(license ? { license } : {}),
      modelfile: renderModelfile({ name, from: resolved.modelPath, adapters: resolved.adapters?.map((a) => a.path), ...view }),
      ...(parameters ? { parameters } : {}),
      ...(view.template !== undefined ? { template: view.template } : {}),
      ...(view.system !== undefined ? { system: view.system } : {}),
      details: view.details,
      ...(view.messages.length > 0 ? { messages: view.messages } : {}),
      model_info: view.modelInfo,
      capabilities: view.capabilities,
      ...(view.voices ? { voices: view.voices } : {}),
      modified_at: localTime(view.stored.modifiedAt),
    };
  });

  app.post('/api/copy', { config: { scope: 'models:write' } }, async (request, reply) => {
    const body = objectBody(request.body);
    const source = optString(body, 'source');
    const destination = optString(body, 'destination');
    if (!source) throw Errors.badRequest('source is required', { param: 'source' });
    if (!destination) throw Errors.badRequest('destination is required', { param: 'destination' });
    checkModelAllowed(source, 'source');
    checkModelAllowed(destination, 'destination');
    await store.copy(source, destination);
    return reply.code(200).send();
  });

  app.delete('/api/delete', { config: { scope: 'models:write' } }, async (request, reply) => {
    const name = modelField(objectBody(request.body));
    checkModelAllowed(name);
    await store.delete(name);
    return reply.code(200).send();
  });
}
