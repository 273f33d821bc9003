/**
 * `HEAD|POST /api/blobs/:digest`: the upload half of offline import. The body is the raw file of
 * any size, streamed to disk and hashed on the way; it is kept only when its SHA-256 matches.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';
import { Readable } from 'node:stream';
import { Errors } from 'lia/plugin';
import { normalizeDigest } from '../store/paths.js';
import type { ModelStoreService } from '../store/store.js';
import { markUploaded, mayUseBlob } from './blob-access.js';

/** Registers `HEAD|POST /api/blobs/:digest` in a child context with a raw-stream body parser. */
export async function registerBlobRoutes(app: FastifyInstance, store: ModelStoreService): Promise<void> {
  // A child context of its own, so the raw-stream parser below applies to these routes only.
  await app.register(async (blobs) => {
    blobs.removeAllContentTypeParsers();
    blobs.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    blobs.head('/api/blobs/:digest', { config: { scope: 'models:write' } }, async (request, reply) => {
      const digest = normalizeDigest((request.params as { digest: string }).digest);
      // A blob of a model outside the key's allow-list is not there for it (blob-access.ts).
      if ((await store.blobs.size(digest)) === null || !(await mayUseBlob(store, digest))) throw Errors.notFound(`blob "${digest}" not found`);
      return reply.code(200).send();
    });

    blobs.post('/api/blobs/:digest', { config: { scope: 'models:write' } }, async (request, reply) => {
      const digest = normalizeDigest((request.params as { digest: string }).digest);
      const body = request.body as Readable | undefined;
      // A blob the store holds is taken without its bytes, unless it is another model's the key
      // may not use: then the bytes must come, and matching the digest proves the key holds them.
      if ((await store.blobs.size(digest)) !== null && (await mayUseBlob(store, digest))) {
        body?.resume();
        return reply.code(200).send();
      }
      const source = body ?? Readable.from([]);
      try {
        const blob = await store.blobs.ingest(source, digest);
        markUploaded(digest);
        return reply.code(blob.created ? 201 : 200).send();
      } catch (err) {
        // The client may still be sending the rest of a large body: end the connection with the
        // answer rather than leave it half-read (a keep-alive socket that never goes idle).
        reply.header('connection', 'close');
        throw err;
      }
    });
  });
}
