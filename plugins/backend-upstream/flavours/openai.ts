/**
 * The OpenAI flavour (vLLM, SGLang, TGI, llama-server, LIA's own `/v1`): the requests and the
 * streamed answers are `lia/plugin`'s OpenAI wire codec (`openaiWire`, shared with
 * backend-llama-server); this adds where such an upstream lists its models.
 *
 * @module
 */
import { openaiWire } from 'lia/openai-wire';
import type { Flavour } from './types.js';

export const openai: Flavour = {
  chat: (model, params) => openaiWire.chat(model, params),
  generate: (model, params) => openaiWire.generate(model, params),
  embed: (model, params) => openaiWire.embed(model, params),
  events: (lines, started) => openaiWire.events(lines, started),
  embedResult: (json) => openaiWire.embedResult(json),
  listPath: '/v1/models',
  listed(json) {
    const data = (json as { data?: Array<{ id?: unknown }> }).data;
    return Array.isArray(data) ? data.map((m) => m.id).filter((n): n is string => typeof n === 'string') : [];
  },
};
