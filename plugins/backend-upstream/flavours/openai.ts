/**
 * The OpenAI flavour (vLLM, SGLang, TGI, llama-server, LIA's own `/v1`): a chat becomes a streamed
 * chat completion; a generation becomes a chat completion with the prompt as the user's message,
 * or a raw completion (`/v1/completions`) when it is raw or has a suffix; Ollama option names
 * become OpenAI's. The SSE answer maps chunk by chunk onto the engine's events, tool call
 * fragments gathered into one `tool_calls` event.
 *
 * @module
 */
import { Errors, type ChatMessage, type GenerationEvent, type OutputFormat, type SamplingOptions, type ToolCall } from 'lia/plugin';
import { nsSince, type Flavour } from './types.js';

/** Ollama's option names in OpenAI's (and vLLM's) spelling; options without an equivalent are left out. */
function sampling(o: SamplingOptions): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (o.temperature !== undefined) out['temperature'] = o.temperature;
  if (o.top_p !== undefined) out['top_p'] = o.top_p;
  if (o.top_k !== undefined) out['top_k'] = o.top_k;
  if (o.min_p !== undefined) out['min_p'] = o.min_p;
  if (o.seed !== undefined) out['seed'] = o.seed;
  if (o.stop?.length) out['stop'] = o.stop;
  if (o.presence_penalty !== undefined) out['presence_penalty'] = o.presence_penalty;
  if (o.frequency_penalty !== undefined) out['frequency_penalty'] = o.frequency_penalty;
  if (o.repeat_penalty !== undefined) out['repetition_penalty'] = o.repeat_penalty;
  if (o.num_predict !== undefined && o.num_predict >= 0) out['max_tokens'] = o.num_predict;
  return out;
}

function responseFormat(format: OutputFormat | undefined): Record<string, unknown> {
  if (format === undefined) return {};
  if (format === 'json') return { response_format: { type: 'json_object' } };
  return { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: format } } };
}

/** Native messages in OpenAI's shape; tool results are paired with the calls before them by order. */
function messages(list: ChatMessage[]): Record<string, unknown>[] {
  const pending: string[] = [];
  return list.map((m, i) => {
    if (m.role === 'assistant' && m.tool_calls?.length) {
      pending.length = 0;
      const calls = m.tool_calls.map((c, j) => {
        const id = c.id ?? `call_${i}_${j}`;
        pending.push(id);
        return { id, type: 'function', function: { name: c.function.name, arguments: JSON.stringify(c.function.arguments ?? {}) } };
      });
      return { role: 'assistant', content: m.content || null, tool_calls: calls };
    }
    if (m.role === 'tool') return { role: 'tool', content: m.content, tool_call_id: pending.shift() ?? `call_${i}` };
    return { role: m.role, content: m.content };
  });
}

type Chunk = {
  error?: unknown;
  choices?: Array<{
    text?: string;
    delta?: { content?: string | null; reasoning_content?: string | null; tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }> };
    finish_reason?: string | null;
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
};

function toolCalls(parts: Map<number, { id?: string; name: string; args: string }>): ToolCall[] {
  return [...parts.entries()].map(([index, p]) => {
    let args: Record<string, unknown> = {};
    try {
      const parsed: unknown = JSON.parse(p.args || '{}');
      if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
    } catch {
      // Arguments that are not a JSON object are dropped, as a model's malformed call would be.
    }
    return { ...(p.id ? { id: p.id } : {}), function: { index, name: p.name, arguments: args } };
  });
}

export const openai: Flavour = {
  chat(model, p) {
    const choice = p.toolChoice && p.toolChoice !== 'auto' ? { tool_choice: typeof p.toolChoice === 'string' ? p.toolChoice : { type: 'function', function: { name: p.toolChoice.name } } } : {};
    return {
      path: '/v1/chat/completions',
      body: {
        model,
        messages: messages(p.messages),
        stream: true,
        stream_options: { include_usage: true },
        ...sampling(p.options),
        ...(p.tools ? { tools: p.tools } : {}),
        ...choice,
        ...responseFormat(p.format),
      },
    };
  },
  generate(model, p) {
    if (p.context?.length) throw Errors.badRequest('context (token ids) cannot be forwarded to an OpenAI-flavoured upstream', { param: 'context' });
    if (p.template !== undefined && !p.raw) throw Errors.badRequest('a template cannot be forwarded to an OpenAI-flavoured upstream', { param: 'template' });
    const common = { model, stream: true, stream_options: { include_usage: true }, ...sampling(p.options), ...responseFormat(p.format) };
    if (p.raw || p.suffix) {
      return { path: '/v1/completions', body: { ...common, prompt: p.prompt, ...(p.suffix ? { suffix: p.suffix } : {}) } };
    }
    const msgs = [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: p.prompt }];
    return { path: '/v1/chat/completions', body: { ...common, messages: msgs } };
  },
  embed(model, p) {
    return { path: '/v1/embeddings', body: { model, input: p.inputs, encoding_format: 'float', ...(p.dimensions ? { dimensions: p.dimensions } : {}) } };
  },
  async *events(source, started) {
    const calls = new Map<number, { id?: string; name: string; args: string }>();
    let finish: string | null | undefined;
    let usage: Chunk['usage'];
    let tokens = 0;
    let first: bigint | null = null;
    let finished = false;
    for await (const line of source) {
      if (!line.startsWith('data:')) continue; // comments, event names, ids
      const data = line.slice(5).trim();
      if (data === '[DONE]') {
        finished = true;
        break;
      }
      let chunk: Chunk;
      try {
        chunk = JSON.parse(data) as Chunk;
      } catch {
        throw Errors.badGateway('the upstream sent a frame that is not JSON');
      }
      if (chunk.error !== undefined) throw Errors.badGateway('the upstream failed while answering');
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices?.[0];
      if (!c) continue;
      first ??= process.hrtime.bigint();
      const reasoning = c.delta?.reasoning_content;
      if (reasoning) yield { type: 'thinking', text: reasoning };
      const text = c.delta?.content ?? c.text;
      if (text) {
        tokens++;
        yield { type: 'token', text };
      }
      for (const t of c.delta?.tool_calls ?? []) {
        const index = t.index ?? 0;
        const part = calls.get(index) ?? { name: '', args: '' };
        if (t.id) part.id = t.id;
        if (t.function?.name) part.name += t.function.name;
        if (t.function?.arguments) part.args += t.function.arguments;
        calls.set(index, part);
      }
      if (c.finish_reason) finish = c.finish_reason;
    }
    if (!finished && !finish) throw Errors.badGateway('the upstream ended its answer before it was done');
    if (calls.size > 0) yield { type: 'tool_calls', calls: toolCalls(calls) };
    const now = process.hrtime.bigint();
    const done: GenerationEvent = {
      type: 'done',
      reason: finish === 'length' ? 'length' : 'stop',
      promptTokens: usage?.prompt_tokens ?? 0,
      completionTokens: usage?.completion_tokens ?? tokens,
      promptEvalNs: first ? Number(first - started) : nsSince(started),
      evalNs: first ? Number(now - first) : 0,
    };
    yield done;
  },
  embedResult(json) {
    const j = json as { data?: Array<{ index?: number; embedding?: number[] }>; usage?: { prompt_tokens?: number } };
    if (!Array.isArray(j.data) || j.data.some((d) => !Array.isArray(d.embedding))) throw Errors.badGateway('the upstream sent no embeddings');
    const sorted = [...j.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    return { embeddings: sorted.map((d) => d.embedding as number[]), promptTokens: j.usage?.prompt_tokens ?? 0 };
  },
  listPath: '/v1/models',
  listed(json) {
    const data = (json as { data?: Array<{ id?: unknown }> }).data;
    return Array.isArray(data) ? data.map((m) => m.id).filter((n): n is string => typeof n === 'string') : [];
  },
};
