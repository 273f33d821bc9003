/**
 * `lia/openai-wire`: the public module of the `openai-wire` plugin, for backends that talk to an
 * OpenAI-compatible server (llama-server, vLLM, SGLang, another LIA): the engine's parameters as
 * `/v1/...` bodies and a streamed answer back as the engine's events (codec.ts). A backend that
 * imports it declares the plugin (`dependencies` and `requires: ['openai-wire']`). It follows no
 * API version, as `lia/utils`.
 *
 * @module
 */
import type { openaiWire } from './codec.js';

export { openaiWire, streamLines, nsSince, type WireCall } from './codec.js';

/** What the `openai-wire` plugin offers through its hook (`hooks.extensions.get('openai-wire')`). */
export interface OpenAiWireHook {
  /** The codec, as the module exports it. */
  readonly codec: typeof openaiWire;
}

declare module 'lia/plugin' {
  interface CustomHooks {
    'openai-wire': OpenAiWireHook;
  }
}
