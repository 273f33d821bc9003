/**
 * Plugin "openai-wire": OpenAI's wire format as an engine client speaks it, shared by the backends
 * that run models behind an OpenAI-compatible server (backend-llama-server's local llama-server,
 * backend-upstream's remote engines). Its public module `lia/openai-wire` holds the codec; the
 * `openai-wire` hook offers the same codec to a plugin that prefers hooks. The backends declare it,
 * so disabling it while one of them is enabled stops the start with exit code 2, naming it.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { openaiWire } from './codec.js';

export default definePlugin({
  name: 'openai-wire',
  apiVersion: 2,
  description: "OpenAI's wire format for backends that talk to an OpenAI-compatible server (llama-server, upstream engines)",
  provides: ['openai-wire'],
  async setup(_app, ctx) {
    ctx.hooks.extensions.provide('openai-wire', { codec: openaiWire }, ctx.name);
  },
});
