/**
 * The `webui` plugin (service `svc-webui`): the web console at `/ui/`, a Preact app built by Vite
 * from `plugins/webui/app/` into `dist/webui/` (see docs/webui.md). The files are public; every
 * thing the console shows comes from the public APIs with the key the user signs in with, so it
 * can do nothing a script with that key cannot. Files are served from memory, precompressed
 * (brotli or gzip, as the browser accepts), immutable when content-hashed, under a CSP that
 * allows scripts and styles from this origin only. Stopping `svc-webui` makes `/ui/` answer a
 * 503 page saying so.
 *
 * @module
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { definePlugin } from 'lia/plugin';
import { projectPath } from 'lia/utils';
import { IMMUTABLE, loadAssets, pickEncoding, REVALIDATE } from './assets.js';
import { NOT_BUILT_PAGE, STOPPED_PAGE } from './pages.js';

/** The console's CSP: this origin only (and the page's own blob: audio), no inline script or style, no framing, no plugins. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  // Read aloud plays the audio it fetched from a blob: URL the page made itself.
  'media-src blob:',
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

export default definePlugin({
  name: 'webui',
  apiVersion: 2,
  description: 'Web console at /ui/: chat, models, system, keys, CA download',
  services: [{ name: 'svc-webui', description: 'LIA web console', required: false }],
  async setup(app, ctx) {
    const assets = await loadAssets(projectPath('dist', 'webui'));
    if (!assets) ctx.log.warn('dist/webui is missing: the web console is not built (npm run build)');
    let serving = false;
    ctx.hooks.services.implement('svc-webui', {
      async start() {
        serving = true;
      },
      async stop() {
        serving = false;
      },
    });

    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      reply.header('Content-Security-Policy', CONSOLE_CSP).header('X-Frame-Options', 'DENY');
      if (!serving) return reply.code(503).type('text/html; charset=utf-8').header('Cache-Control', 'no-store').send(STOPPED_PAGE);
      if (!assets) return reply.code(503).type('text/html; charset=utf-8').header('Cache-Control', 'no-store').send(NOT_BUILT_PAGE);
      const rel = (request.params as { '*'?: string })['*'] ?? '';
      const asset = assets.get(rel === '' ? 'index.html' : rel);
      if (!asset) {
        return reply
          .code(404)
          .type('text/html; charset=utf-8')
          .header('Cache-Control', 'no-cache')
          .send('<!doctype html><title>Not found</title><p>No such file in the web console. <a href="/ui/">Open the console</a>.</p>');
      }
      reply
        .header('Cache-Control', asset.immutable ? IMMUTABLE : REVALIDATE)
        .header('ETag', asset.etag)
        .header('Vary', 'Accept-Encoding');
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      const { encoding, body } = pickEncoding(asset, request.headers['accept-encoding']);
      if (encoding) reply.header('Content-Encoding', encoding);
      return reply.type(asset.type).send(body);
    };
    app.get('/ui/', { config: { public: true } }, handler);
    app.get('/ui/*', { config: { public: true } }, handler);
  },
});
