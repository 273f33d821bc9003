// @ts-check
/**
 * lia-backend-echo: an example third-party inference backend for LIA.
 *
 * It adds the `echo` model format (one `*.echo` text file) and a backend that serves it. An echo
 * model answers with the prompt (or the last user message) after the text of its file, streamed
 * word by word, `repeat` times over. Enable it in `lia.config.yaml`:
 *
 * ```yaml
 * plugins:
 *   backend-echo:
 *     module: lia-backend-echo
 *     options: { repeat: 2 }
 * ```
 *
 * The plugin only registers the backend: the model store asks it to recognise and describe echo
 * files, and the engine (scheduler, `/api/generate`, `/api/chat`, `/v1/chat/completions`) loads
 * echo models through it like any other.
 */
import { definePlugin } from 'lia/plugin';
import { Type } from 'lia/utils';
import { createEchoBackend } from './backend.js';

const Options = Type.Object(
  {
    repeat: Type.Integer({ minimum: 1, maximum: 5, default: 1, description: 'How many times an answer echoes the input. Defaults to 1.' }),
    tokenDelayMs: Type.Integer({
      minimum: 0,
      maximum: 1000,
      default: 0,
      description: 'Pause between streamed words, in milliseconds, to look like a model. Defaults to 0.',
    }),
  },
  { additionalProperties: false },
);

export default definePlugin({
  name: 'backend-echo',
  apiVersion: 2,
  description: 'Example backend: "echo" models (*.echo) answer with the prompt',
  options: Options,
  env: { LIA_ECHO_REPEAT: 'repeat' },
  setup(_app, ctx) {
    ctx.hooks.extensions.get('backends').register(createEchoBackend(ctx.options), ctx.name);
    ctx.hooks.banner.register({
      name: 'backend-echo',
      order: 200,
      lines: () => [['Echo models', `repeat x${ctx.options.repeat}`]],
    });
    ctx.log.info({ repeat: ctx.options.repeat }, 'echo backend registered');
  },
});
