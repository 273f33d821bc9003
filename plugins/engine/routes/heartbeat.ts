/**
 * `GET /`, public: Ollama's CLI and clients probe it as a heartbeat and expect the text
 * `Ollama is running`. A browser (one that asks for HTML) is sent to the web console at `/ui/`
 * when a plugin serves it.
 *
 * @module
 */
import type { FastifyInstance } from 'fastify';

export function heartbeatRoute(app: FastifyInstance): void {
  app.get('/', { config: { public: true } }, async (request, reply) => {
    const wantsHtml = String(request.headers.accept ?? '').includes('text/html');
    // The router stores paths without their trailing slash (ignoreTrailingSlash), so ask for `/ui`.
    if (wantsHtml && app.hasRoute({ method: 'GET', url: '/ui' })) return reply.redirect('/ui/');
    return reply.type('text/plain; charset=utf-8').send('Ollama is running');
  });
}
