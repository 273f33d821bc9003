/**
 * Plugin "gguf": the GGUF model format, which every llama.cpp engine runs. It provides the `gguf`
 * hook (the one format handler: recognising a GGUF upload, describing it for `/api/show` and
 * `/api/tags` from its header, its chat template and its memory footprint) and the public module
 * `lia/gguf` (the prompts, templates, errors and estimate the engines share).
 *
 * The engines declare it (`requires: ['gguf']`): backend-llama-cpp serves the format with this
 * handler; backend-llama-server runs it with the same one, and serves GGUF models alone when
 * backend-llama-cpp is disabled (the handler is registered as a format of its own, see
 * `BackendRegistry.addFormat`). Disabling this plugin while an engine is enabled stops the start
 * with exit code 2, naming it.
 *
 * @module
 */
import { definePlugin } from 'lia/plugin';
import { ggufFormat } from './format.js';

export default definePlugin({
  name: 'gguf',
  apiVersion: 2,
  description: 'The GGUF model format: header reading, chat templates and memory estimates for every llama.cpp engine',
  dependencies: ['engine'],
  provides: ['gguf'],
  async setup(_app, ctx) {
    const format = ggufFormat();
    ctx.hooks.extensions.provide('gguf', { format }, ctx.name);
    ctx.hooks.extensions.get('backends').addFormat(format);
  },
});
