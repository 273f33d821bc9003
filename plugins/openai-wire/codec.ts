/**
 * The OpenAI wire format as an engine client speaks it: the engine's native parameters
 * ({@link ChatParams}, {@link GenerateParams}, {@link EmbedParams}) as the request bodies of
 * `/v1/chat/completions`, `/v1/completions` and `/v1/embeddings`, and the streamed answer (SSE
 * chunks) back as the engine's {@link GenerationEvent}s, tool-call fragments gathered into one
 * `tool_calls` event. vLLM, SGLang, TGI, llama-server and LIA's own `/v1` speak it.
 *
 * Two backends speak it, `backend-upstream` (remote engines) and `backend-llama-server` (a local
 * llama-server per model), through this plugin's public module `lia/openai-wire`. It only
 * translates; sending the request is the caller's (each has its own connection policy).
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import type {
  ChatMessage,
  ChatParams,
  EmbedParams,
  EmbedResult,
  GenerateParams,
  GeneratedLogprob,
  GenerationEvent,
  OutputFormat,
  SamplingOptions,
  ToolCall,
} from 'lia/engine';
import { imageMimeType } from 'lia/utils';

/** One request to an OpenAI-compatible server: the path under its base URL and the JSON body. */
export interface WireCall {
  path: string;
  body: Record<string, unknown>;
}

/** Ollama's option names in OpenAI's (and vLLM's, llama-server's) spelling; options without an equivalent are left out. */
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

/**
 * Asks for log probabilities: `logprobs` and `top_logprobs` on a chat completion, `logprobs` (the
 * number of alternatives) on a completion. At least one alternative is asked for, since a server
 * that is asked for none returns no probabilities at all (llama-server); {@link openaiWire.events}
 * trims them back to `n`.
 */
function logprobFields(n: number | undefined, chat: boolean): Record<string, unknown> {
  if (n === undefined) return {};
  return chat ? { logprobs: true, top_logprobs: Math.max(1, n) } : { logprobs: Math.max(1, n) };
}

type WireLogprob = { token?: string; logprob?: number | null; bytes?: number[] | null; top_logprobs?: WireLogprob[] };

/** A chunk's `logprobs.content` entries as the engine's, with at most `n` alternatives each. */
function logprobsOf(entries: WireLogprob[], n: number): GeneratedLogprob[] {
  const one = (e: WireLogprob) => {
    const token = e.token ?? '';
    return { token, logprob: Math.min(0, e.logprob ?? -9999), bytes: e.bytes ?? [...Buffer.from(token)] };
  };
  return entries.map((e) => ({ ...one(e), top_logprobs: (e.top_logprobs ?? []).slice(0, n).map(one) }));
}

function responseFormat(format: OutputFormat | undefined): Record<string, unknown> {
  if (format === undefined) return {};
  if (format === 'json') return { response_format: { type: 'json_object' } };
  return { response_format: { type: 'json_schema', json_schema: { name: 'output', schema: format } } };
}

/**
 * A message's content: plain text, or text, `image_url` parts (data URLs) and `input_audio` parts
 * (base64 WAV, as the engine hands clips on) when it carries media.
 */
function content(text: string, images: readonly string[] | undefined, audio?: readonly string[]): unknown {
  if (!images?.length && !audio?.length) return text;
  return [
    ...(text ? [{ type: 'text', text }] : []),
    ...(images ?? []).map((b64) => ({ type: 'image_url', image_url: { url: `data:${imageMimeType(b64)};base64,${b64}` } })),
    ...(audio ?? []).map((b64) => ({ type: 'input_audio', input_audio: { data: b64, format: 'wav' } })),
  ];
}

/** Native messages in OpenAI's shape; tool results are paired with the calls before them by order. */
function messages(list: readonly ChatMessage[]): Record<string, unknown>[] {
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
    return { role: m.role, content: content(m.content, m.images, m.audio) };
  });
}

type Chunk = {
  error?: unknown;
  choices?: Array<{
    text?: string;
    delta?: {
      content?: string | null;
      reasoning_content?: string | null;
      tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: string } }>;
    };
    finish_reason?: string | null;
    /** The generated tokens' log probabilities, when asked for (chat format; llama-server uses it on both endpoints). */
    logprobs?: { content?: WireLogprob[] | null } | null;
  }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } } | null;
  /** llama-server's own figures (milliseconds), in its last chunk. */
  timings?: { prompt_ms?: number; predicted_ms?: number; cache_n?: number; draft_n?: number; draft_n_accepted?: number };
  /** llama-server's debug fields (asked for with `verbose`): the stop sequence that ended the text. */
  __verbose?: { stopping_word?: string };
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

/** Nanoseconds since `t` (a `process.hrtime.bigint()`). */
export function nsSince(t: bigint): number {
  return Number(process.hrtime.bigint() - t);
}

/** The lines of a streamed body (SSE or NDJSON), without their line ends; empty lines are skipped. */
export async function* streamLines(body: AsyncIterable<Buffer | Uint8Array | string>): AsyncIterable<string> {
  let rest = '';
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    rest += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, nl).replace(/\r$/, '');
      rest = rest.slice(nl + 1);
      if (line !== '') yield line;
    }
  }
  rest += decoder.decode();
  if (rest.trim() !== '') yield rest;
}

/** The OpenAI wire codec (see the module's description). */
export const openaiWire = {
  /** A streamed chat completion with usage. */
  chat(model: string, p: ChatParams): WireCall {
    const choice =
      p.toolChoice && p.toolChoice !== 'auto'
        ? { tool_choice: typeof p.toolChoice === 'string' ? p.toolChoice : { type: 'function', function: { name: p.toolChoice.name } } }
        : {};
    return {
      path: '/v1/chat/completions',
      body: {
        model,
        messages: messages(p.messages),
        stream: true,
        stream_options: { include_usage: true },
        ...sampling(p.options),
        ...(p.tools ? { tools: p.tools } : {}),
        ...logprobFields(p.logprobs, true),
        ...choice,
        ...responseFormat(p.format),
      },
    };
  },

  /**
   * A generation: a chat completion with the prompt (and its images and audio) as the user's
   * message, or a raw completion (`/v1/completions`) when it is raw or has a suffix. `context`
   * (token ids) and a Go template cannot travel (400); neither can media with a raw prompt.
   */
  generate(model: string, p: GenerateParams): WireCall {
    if (p.context?.length) throw Errors.badRequest('context (token ids) cannot be forwarded to an OpenAI-compatible engine', { param: 'context' });
    if (p.template !== undefined && !p.raw) throw Errors.badRequest('a template cannot be forwarded to an OpenAI-compatible engine', { param: 'template' });
    const common = { model, stream: true, stream_options: { include_usage: true }, ...sampling(p.options), ...responseFormat(p.format) };
    if (p.raw || p.suffix) {
      if (p.images?.length) throw Errors.badRequest('images need the chat template: send them without raw or suffix', { param: 'images' });
      if (p.audio?.length) throw Errors.badRequest('audio needs the chat template: send it without raw or suffix', { param: 'images' });
      return { path: '/v1/completions', body: { ...common, ...logprobFields(p.logprobs, false), prompt: p.prompt, ...(p.suffix ? { suffix: p.suffix } : {}) } };
    }
    const msgs = [...(p.system ? [{ role: 'system', content: p.system }] : []), { role: 'user', content: content(p.prompt, p.images, p.audio) }];
    return { path: '/v1/chat/completions', body: { ...common, ...logprobFields(p.logprobs, true), messages: msgs } };
  },

  embed(model: string, p: EmbedParams): WireCall {
    return { path: '/v1/embeddings', body: { model, input: p.inputs, encoding_format: 'float', ...(p.dimensions ? { dimensions: p.dimensions } : {}) } };
  },

  /**
   * The events of a streamed answer to {@link chat} or {@link generate} (`started`: when the
   * request went out; `logprobs`: the request's, whose alternatives each token event then carries,
   * those of a chunk without text going with the next text). Throws a 502 when the stream breaks
   * off or carries an error. The `done` event names the stop sequence that ended the text where
   * the server says (llama-server's `__verbose.stopping_word`, when the request asked for it).
   */
  async *events(source: AsyncIterable<string>, started: bigint, logprobs?: number): AsyncIterable<GenerationEvent> {
    let pending: GeneratedLogprob[] = [];
    const calls = new Map<number, { id?: string; name: string; args: string }>();
    let finish: string | null | undefined;
    let usage: Chunk['usage'];
    let timings: Chunk['timings'];
    let tokens = 0;
    let stopSequence: string | undefined;
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
        throw Errors.badGateway('the engine sent a frame that is not JSON');
      }
      if (chunk.error !== undefined) throw Errors.badGateway('the engine failed while answering');
      if (chunk.usage) usage = chunk.usage;
      if (chunk.timings) timings = chunk.timings;
      if (chunk.__verbose?.stopping_word) stopSequence = chunk.__verbose.stopping_word;
      const c = chunk.choices?.[0];
      if (!c) continue;
      first ??= process.hrtime.bigint();
      const reasoning = c.delta?.reasoning_content;
      if (reasoning) yield { type: 'thinking', text: reasoning };
      const text = c.delta?.content ?? c.text;
      if (logprobs !== undefined && c.logprobs?.content?.length) pending.push(...logprobsOf(c.logprobs.content, logprobs));
      if (text) {
        tokens++;
        if (logprobs !== undefined) {
          yield { type: 'token', text, logprobs: pending };
          pending = [];
        } else yield { type: 'token', text };
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
    if (!finished && !finish) throw Errors.badGateway('the engine ended its answer before it was done');
    if (calls.size > 0) yield { type: 'tool_calls', calls: toolCalls(calls) };
    const now = process.hrtime.bigint();
    const cached = usage?.prompt_tokens_details?.cached_tokens ?? timings?.cache_n;
    const done: GenerationEvent = {
      type: 'done',
      reason: finish === 'length' ? 'length' : 'stop',
      promptTokens: usage?.prompt_tokens ?? 0,
      ...(cached !== undefined ? { cachedTokens: cached } : {}),
      ...(stopSequence !== undefined && finish !== 'length' ? { stopSequence } : {}),
      completionTokens: usage?.completion_tokens ?? tokens,
      promptEvalNs: timings?.prompt_ms !== undefined ? Math.round(timings.prompt_ms * 1e6) : first ? Number(first - started) : nsSince(started),
      evalNs: timings?.predicted_ms !== undefined ? Math.round(timings.predicted_ms * 1e6) : first ? Number(now - first) : 0,
      // Speculative decoding (llama-server sends these only when it drafted something).
      ...(timings?.draft_n !== undefined ? { draft: { tokens: timings.draft_n, accepted: timings.draft_n_accepted ?? 0 } } : {}),
    };
    yield done;
  },

  embedResult(json: unknown): EmbedResult {
    const j = json as { data?: Array<{ index?: number; embedding?: number[] }>; usage?: { prompt_tokens?: number } };
    if (!Array.isArray(j.data) || j.data.some((d) => !Array.isArray(d.embedding))) throw Errors.badGateway('the engine sent no embeddings');
    const sorted = [...j.data].sort((a, b) => (a.index ?? 0) - (b.index ?? 0));
    return { embeddings: sorted.map((d) => d.embedding as number[]), promptTokens: j.usage?.prompt_tokens ?? 0 };
  },
};
