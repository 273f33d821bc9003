/**
 * `POST /api/pull` and `POST /api/push`: thin handlers over the puller and the pusher. The name
 * is checked before the stream starts (an invalid one is a 400); everything after is streamed.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { checkModelAllowed } from 'lia/utils';
import { parseName } from '../store/names.js';
import type { ModelStoreService } from '../store/store.js';
import { repositoryUrl } from '../registry/client.js';
import type { Puller } from '../registry/pull.js';
import type { Pusher } from '../registry/push.js';
import { modelField, objectBody, optBool, wantsStream } from './body.js';
import { sendProgress } from './progress.js';

/** Registers `POST /api/pull` and `POST /api/push`. */
export function registerRegistryRoutes(app: FastifyInstance, store: ModelStoreService, puller: Puller, pusher: Pusher): void {
  app.post('/api/pull', { config: { scope: 'models:write' } }, async (request, reply) => {
    const body = objectBody(request.body);
    checkModelAllowed(modelField(body)); // a key's allow-list: the name the model is stored under
    const name = parseName(modelField(body));
    store.refuseRemote(modelField(body), 'pull');
    const repo = { name, insecure: optBool(body, 'insecure') ?? false };
    repositoryUrl(repo); // an http:// name without insecure is a 400 now, not a stream error
    return sendProgress(reply, wantsStream(body), (emit, signal) => puller.pull(repo, emit, signal));
  });

  app.post('/api/push', { config: { scope: 'models:write' } }, async (request, reply) => {
    const body = objectBody(request.body);
    const raw = modelField(body);
    checkModelAllowed(raw);
    const name = parseName(raw);
    store.refuseRemote(raw, 'push');
    const repo = { name, insecure: optBool(body, 'insecure') ?? false };
    repositoryUrl(repo);
    await store.get(raw); // unknown model: 404 before the stream
    return sendProgress(reply, wantsStream(body), (emit, signal) => pusher.push(repo, emit, signal));
  });
}
