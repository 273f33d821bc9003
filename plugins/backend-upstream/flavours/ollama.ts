/**
 * The Ollama flavour (Ollama, LIA's own `/api`): the native shapes are Ollama's, so requests pass
 * almost as they are; the NDJSON answer maps line by line onto the engine's events.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type { GenerationEvent, ToolCall } from 'lia/engine';
import type { Flavour } from './types.js';

type Line = {
  error?: unknown;
  response?: string;
  thinking?: string;
  message?: { content?: string; thinking?: string; tool_calls?: ToolCall[] };
  done?: boolean;
  done_reason?: string;
  prompt_eval_count?: number;
  eval_count?: number;
  prompt_eval_duration?: number;
  eval_duration?: number;
  context?: number[];
};

export const ollama: Flavour = {
  chat(model, p) {
    if (p.toolChoice && p.toolChoice !== 'auto') {
      throw Errors.badRequest('a required or named tool choice cannot be forwarded to an Ollama-flavoured upstream', { param: 'tool_choice' });
    }
    return {
      path: '/api/chat',
      body: {
        model,
        messages: p.messages,
        stream: true,
        options: p.options,
        ...(p.tools ? { tools: p.tools } : {}),
        ...(p.format ? { format: p.format } : {}),
      },
    };
  },
  generate(model, p) {
    return {
      path: '/api/generate',
      body: {
        model,
        prompt: p.prompt,
        stream: true,
        raw: p.raw,
        options: p.options,
        ...(p.system !== undefined ? { system: p.system } : {}),
        ...(p.suffix !== undefined ? { suffix: p.suffix } : {}),
        ...(p.template !== undefined ? { template: p.template } : {}),
        ...(p.context ? { context: p.context } : {}),
        ...(p.format ? { format: p.format } : {}),
      },
    };
  },
  embed(model, p) {
    return { path: '/api/embed', body: { model, input: p.inputs, truncate: p.truncate, ...(p.dimensions ? { dimensions: p.dimensions } : {}) } };
  },
  async *events(source) {
    for await (const raw of source) {
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
      } catch {
        throw Errors.badGateway('the upstream sent a line that is not JSON');
      }
      if (line.error !== undefined) throw Errors.badGateway('the upstream failed while answering');
      const thinking = line.message?.thinking ?? line.thinking;
      if (thinking) yield { type: 'thinking', text: thinking };
      const text = line.message?.content ?? line.response;
      if (text) yield { type: 'token', text };
      if (line.message?.tool_calls?.length) yield { type: 'tool_calls', calls: line.message.tool_calls };
      if (line.done) {
        const done: GenerationEvent = {
          type: 'done',
          reason: line.done_reason === 'length' ? 'length' : 'stop',
          promptTokens: line.prompt_eval_count ?? 0,
          completionTokens: line.eval_count ?? 0,
          promptEvalNs: line.prompt_eval_duration ?? 0,
          evalNs: line.eval_duration ?? 0,
          ...(line.context ? { context: line.context } : {}),
        };
        yield done;
        return;
      }
    }
    throw Errors.badGateway('the upstream ended its answer before it was done');
  },
  embedResult(json) {
    const j = json as { embeddings?: number[][]; prompt_eval_count?: number };
    if (!Array.isArray(j.embeddings)) throw Errors.badGateway('the upstream sent no embeddings');
    return { embeddings: j.embeddings, promptTokens: j.prompt_eval_count ?? 0 };
  },
  listPath: '/api/tags',
  listed(json) {
    const models = (json as { models?: Array<{ name?: unknown }> }).models;
    return Array.isArray(models) ? models.map((m) => m.name).filter((n): n is string => typeof n === 'string') : [];
  },
};
