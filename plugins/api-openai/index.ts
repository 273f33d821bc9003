/**
 * The `api-openai` plugin: the OpenAI-compatible inference endpoints under `/v1/`
 * (`chat/completions`, `responses`, `completions`, `embeddings`, `audio/transcriptions`,
 * `audio/translations` (routes/audio.ts), `audio/speech` (routes/speech.ts), `models`), and the rerank API
 * (`/v1/rerank`, with `/rerank` and `/v2/rerank`; rerank.ts). Like Ollama's OpenAI middleware it has no
 * inference path of its own: `translate/` holds pure functions between the OpenAI wire format and
 * the native {@link InferenceService} of the engine, and `routes/` only validates, calls the
 * engine and writes the translation. `/v1/models` lists the model store's catalog.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { definePlugin } from 'lia/plugin';
import { audioRoutes, DEFAULT_MAX_AUDIO_BYTES } from './routes/audio.js';
import { chatRoute } from './routes/chat.js';
import { completionsRoute } from './routes/completions.js';
import { embeddingsRoute } from './routes/embeddings.js';
import { modelsRoutes } from './routes/models.js';
import { rerankRoutes } from './routes/rerank.js';
import { speechRoute } from './routes/speech.js';
import { responsesRoute } from './routes/responses.js';
import { openaiErrorBody, openaiErrorFormat } from './errors.js';

const Options = Type.Object(
  {
    /**
     * Model-name aliases: a requested name → the store's name, for tools that hard-code OpenAI
     * model names (`{"gpt-4o-mini": "qwen2.5:7b"}`). Responses echo the store's name. Defaults
     * to none (an unknown name is a 404 `model_not_found`).
     */
    aliases: Type.Record(Type.String({ minLength: 1 }), Type.String({ minLength: 1 }), { default: {} }),
    /**
     * Serve `POST /v1/responses` (the Responses API). Defaults to true; false leaves the route
     * out, so it answers 404 in OpenAI's shape like any unknown path, and the rest of `/v1` stays.
     */
    responses: Type.Boolean({ default: true }),
    /**
     * The largest audio file `/v1/audio/transcriptions` and `/v1/audio/translations` take, in
     * bytes; a larger upload is a 413 naming `file`. Defaults to 26214400 (25 MiB, OpenAI's limit).
     */
    maxAudioBytes: Type.Integer({ minimum: 1024, maximum: 2 ** 31 - 1, default: DEFAULT_MAX_AUDIO_BYTES }),
  },
  { additionalProperties: false },
);

export default definePlugin({
  name: 'api-openai',
  apiVersion: 2,
  requires: ['inference', 'models'],
  description: 'OpenAI-compatible /v1/ chat completions, responses, completions, embeddings, audio transcriptions, speech and rerank over the native engine',
  options: Options,
  env: { LIA_OPENAI_ALIASES: 'aliases', LIA_OPENAI_MAX_AUDIO_BYTES: 'maxAudioBytes' },
  async setup(app, ctx) {
    ctx.hooks.errorFormats.register(openaiErrorFormat);
    // The rerank paths outside /v1 answer errors as /v1/rerank does.
    ctx.hooks.errorFormats.register({ name: 'openai-rerank', prefix: '/rerank', body: openaiErrorBody });
    ctx.hooks.errorFormats.register({ name: 'openai-rerank-v2', prefix: '/v2/rerank', body: openaiErrorBody });
    const options = { aliases: ctx.options.aliases };
    chatRoute(app, ctx.hooks, options);
    completionsRoute(app, ctx.hooks, options);
    embeddingsRoute(app, ctx.hooks, options);
    rerankRoutes(app, ctx.hooks, options);
    await audioRoutes(app, ctx.hooks, { ...options, maxAudioBytes: ctx.options.maxAudioBytes });
    speechRoute(app, ctx.hooks, options);
    if (ctx.options.responses) responsesRoute(app, ctx.hooks, options);
    modelsRoutes(app, ctx.hooks);
  },
});
