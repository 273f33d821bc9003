/**
 * The `api-anthropic` plugin: Anthropic's Messages API (`POST /v1/messages`, streaming included,
 * and `POST /v1/messages/count_tokens`) over the native engine, so Anthropic's SDKs and Claude
 * Code can use the appliance. Like api-openai it has no inference path of its own: `translate/`
 * holds pure functions between the Messages wire format and the native {@link InferenceService},
 * and `routes/` only validates, calls the engine and writes the translation. It also registers
 * Anthropic's error format for `/v1/messages`, and its routes declare `x-api-key` (the header
 * Anthropic's clients send) as a credential header, which the key strategy reads there (`./auth.ts`).
 * See docs/anthropic.md.
 *
 * It requires `inference` (the engine, or a plugin that replaces it): a configuration without it
 * stops at start (exit 2) naming both. It names no plugin as a dependency, since it reads the
 * engine per request and needs nothing set up before it.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { anthropicErrorFormat } from './errors.js';
import { messagesRoutes } from './routes/messages.js';

export default definePlugin({
  name: 'api-anthropic',
  apiVersion: 2,
  requires: ['inference'],
  description: "Anthropic's Messages API (/v1/messages, count_tokens) over the native engine, with x-api-key auth",
  async setup(app, ctx) {
    ctx.hooks.errorFormats.register(anthropicErrorFormat);
    messagesRoutes(app, ctx.hooks);
  },
});
