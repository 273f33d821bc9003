/**
 * The `webui` plugin (service `svc-webui`): a small page at `/ui/` to chat with the models, see
 * the appliance's health and download the CA. The page itself is public; everything it shows
 * comes from the authenticated APIs with the key the user types (kept in the tab's
 * sessionStorage only). Stopping `svc-webui` takes the page away (503) until it starts again.
 *
 * @module
 */
import { readFile } from 'node:fs/promises';
import { definePlugin, Errors, projectPath } from 'lia/plugin';

export default definePlugin({
  name: 'webui',
  apiVersion: 1,
  description: 'Web UI at /ui/: chat, models, health, CA download',
  service: 'svc-webui',
  async setup(app, ctx) {
    const page = await readFile(projectPath('plugins', 'webui', 'page.html'), 'utf8');
    let serving = false;
    ctx.hooks.services.implement('svc-webui', {
      description: 'LIA web UI',
      required: false,
      async start() {
        serving = true;
      },
      async stop() {
        serving = false;
      },
    });
    app.get('/ui/', { config: { public: true } }, async (_request, reply) => {
      if (!serving) throw Errors.unavailable('svc-webui is stopped');
      return reply
        .type('text/html; charset=utf-8')
        .header('Content-Security-Policy', "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'")
        .header('X-Frame-Options', 'DENY')
        .header('Cache-Control', 'no-cache')
        .send(page);
    });
  },
});
