/**
 * The {@link InferenceService}: the one inference path of the appliance. It resolves the model in
 * the store, layers the model's stored system prompt, messages and parameters under the request,
 * takes a slot from the scheduler and starts the generation on the loaded model. The Ollama routes
 * of this plugin and the OpenAI translator both call it.
 *
 * @module
 */
import { checkSchemaBounds, Errors } from 'lia/plugin';
import type { ChatMessage, ChatParams, GenerationEvent, OutputFormat, ToolChoice, ToolDefinition } from 'lia/plugin';
import type {
  EmbedResponse,
  GenerationStream,
  InferenceChatRequest,
  InferenceEmbedRequest,
  InferenceGenerateRequest,
  InferenceService,
  KeepAlive,
  LoadedModelInfo,
  Think,
} from 'lia/plugin';
import type { InferenceEvent, ModelActivity } from 'lia/plugin';
import type { ModelStore, ResolvedModel } from 'lia/plugin';
import { parseKeepAlive } from './keep-alive.js';
import { mergeOptions } from './request-options.js';
import { splitThinking } from './thinking.js';
import type { Lease, Scheduler } from './scheduler.js';

export class EngineService implements InferenceService {
  /** False while svc-inference is stopped: every request is a 503. */
  running = true;
  readonly #store: () => ModelStore;
  readonly #scheduler: Scheduler;
  readonly #observe: Observe;

  /** @param observe told of requests, tokens and token counts. Defaults to nobody. */
  constructor(store: () => ModelStore, scheduler: Scheduler, observe: Observe = () => {}) {
    this.#store = store;
    this.#scheduler = scheduler;
    this.#observe = observe;
  }

  async generate(req: InferenceGenerateRequest, signal: AbortSignal): Promise<GenerationStream> {
    if (req.raw && (req.template || req.system || req.context?.length)) throw Errors.badRequest('raw mode does not support template, system, or context');
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'generate');
    this.#observe({ type: 'request', model: model.name, kind: 'generate' });
    const think = thinks(model, req.think, req.model);
    const options = mergeOptions(model.parameters, req.options);
    const lease = await this.#acquire(model, req.keep_alive, options.num_ctx, signal);
    const system = req.system ?? model.system;
    const events = lease.model.generate(
      {
        prompt: req.prompt,
        raw: req.raw ?? false,
        options,
        ...(system ? { system } : {}),
        ...(req.suffix ? { suffix: req.suffix } : {}),
        ...(req.template ? { template: req.template } : {}),
        ...(req.context?.length ? { context: req.context } : {}),
        ...(req.stream === false ? { whole: true } : {}),
        ...formatField(req.format),
      },
      signal,
    );
    return { model: model.name, loadNs: lease.loadNs, events: leased(lease, observed(model.name, started, this.#observe, think ? splitThinking(events) : events)) };
  }

  async chat(req: InferenceChatRequest, signal: AbortSignal): Promise<GenerationStream> {
    const tools = toolFields(req.tools, req.toolChoice);
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'chat');
    this.#observe({ type: 'request', model: model.name, kind: 'chat' });
    const think = thinks(model, req.think, req.model);
    const options = mergeOptions(model.parameters, req.options);
    const lease = await this.#acquire(model, req.keep_alive, options.num_ctx, signal);
    const messages: ChatMessage[] = [];
    if (model.system && req.messages[0]?.role !== 'system') messages.push({ role: 'system', content: model.system });
    for (const m of model.messages) {
      if (m.role === 'system' || m.role === 'user' || m.role === 'assistant') messages.push({ role: m.role, content: m.content });
    }
    messages.push(...req.messages);
    const events = lease.model.chat(
      { messages, options, ...tools, ...formatField(req.format), ...(req.stream === false ? { whole: true } : {}) },
      signal,
    );
    return { model: model.name, loadNs: lease.loadNs, events: leased(lease, observed(model.name, started, this.#observe, think ? splitThinking(events) : events)) };
  }

  async embed(req: InferenceEmbedRequest, signal: AbortSignal): Promise<EmbedResponse> {
    const started = process.hrtime.bigint();
    const model = await this.#resolve(req.model, 'embed');
    this.#observe({ type: 'request', model: model.name, kind: 'embed' });
    const options = mergeOptions(model.parameters, req.options);
    const lease = await this.#acquire(model, req.keep_alive, options.num_ctx, signal);
    try {
      const result =
        req.input.length === 0
          ? { embeddings: [], promptTokens: 0 }
          : await lease.model.embed(
              {
                inputs: req.input,
                truncate: req.truncate ?? true,
                normalize: req.normalize ?? true,
                ...(req.dimensions ? { dimensions: req.dimensions } : {}),
              },
              signal,
            );
      this.#observe({ type: 'finished', model: model.name, promptTokens: result.promptTokens, completionTokens: 0 });
      return {
        model: model.name,
        embeddings: result.embeddings,
        promptTokens: result.promptTokens,
        loadNs: lease.loadNs,
        totalNs: Number(process.hrtime.bigint() - started),
      };
    } finally {
      lease.release();
    }
  }

  async load(name: string, keepAlive?: KeepAlive): Promise<{ model: string; loadNs: number }> {
    const model = await this.#resolve(name, 'load');
    const lease = await this.#acquire(model, keepAlive, undefined, new AbortController().signal);
    lease.release();
    return { model: model.name, loadNs: lease.loadNs };
  }

  async unload(name: string): Promise<void> {
    const model = await this.#resolve(name, 'unload');
    await this.#scheduler.unload(model.name);
  }

  unloadAll(): Promise<void> {
    return this.#scheduler.unloadAll();
  }

  ps(): LoadedModelInfo[] {
    return this.#scheduler.ps();
  }

  activity(): ModelActivity[] {
    return this.#scheduler.activity();
  }

  /** Queue depth, busy slots and loaded models (for status pages and tests). */
  stats(): { queued: number; active: number; loaded: number } {
    return this.#scheduler.stats();
  }

  async #resolve(name: string, action: 'generate' | 'chat' | 'embed' | 'load' | 'unload'): Promise<ResolvedModel> {
    if (!this.running) throw Errors.unavailable('svc-inference is stopped; start it with POST /system/services/svc-inference/start');
    if (typeof name !== 'string' || name.trim() === '') throw Errors.badRequest('model is required', { param: 'model' });
    const model = await this.#store().resolve(name);
    const caps = model.capabilities;
    if ((action === 'generate' || action === 'chat') && caps.includes('embedding') && !caps.includes('completion')) {
      throw Errors.badRequest(`"${name}" does not support ${action}`);
    }
    return model;
  }

  #acquire(model: ResolvedModel, keepAlive: KeepAlive | undefined, numCtx: number | undefined, signal: AbortSignal): Promise<Lease> {
    const keepAliveMs = parseKeepAlive(keepAlive);
    return this.#scheduler.acquire(
      model,
      { ...(keepAliveMs !== undefined ? { keepAliveMs } : {}), ...(numCtx && numCtx > 0 ? { contextLength: numCtx } : {}) },
      signal,
    );
  }
}

/**
 * `tools` and `toolChoice` as the backend gets them: `none` drops the tools, `auto` is left out
 * (the default), and a forced choice is checked here, before a model is loaded for it.
 */
export function toolFields(tools: ToolDefinition[] | undefined, choice: ToolChoice | undefined): Pick<ChatParams, 'tools' | 'toolChoice'> {
  if (choice === 'none' || !tools || tools.length === 0) {
    if (choice === 'required' || (typeof choice === 'object' && choice !== null)) {
      throw Errors.badRequest('a required or named tool choice needs tools', { param: 'tool_choice' });
    }
    return {};
  }
  tools.forEach((t, i) => t.function.parameters && checkSchemaBounds(t.function.parameters, `tools[${i}].function.parameters`));
  if (choice === undefined || choice === 'auto') return { tools };
  if (choice === 'required') return { tools, toolChoice: 'required' };
  if (typeof choice === 'object' && choice !== null && typeof choice.name === 'string') {
    if (!tools.some((t) => t.function.name === choice.name)) {
      throw Errors.badRequest(`tool choice "${choice.name}" is not one of the tools`, { param: 'tool_choice' });
    }
    return { tools, toolChoice: { name: choice.name } };
  }
  throw Errors.badRequest(`invalid tool choice: ${JSON.stringify(choice)}`, { param: 'tool_choice' });
}

/**
 * Whether the output is split into thinking and answer (see thinking.ts): `think` true or a level
 * on a model with the `thinking` capability (without it: Ollama's 400), or `'auto'` where it has it.
 */
function thinks(model: ResolvedModel, think: Think | undefined, asked: string): boolean {
  if (think === undefined || think === false) return false;
  const capable = model.capabilities.includes('thinking');
  if (think === 'auto') return capable;
  if (!capable) throw Errors.badRequest(`"${asked}" does not support thinking`, { param: 'think' });
  return true;
}

/** The output format as the backend gets it; a schema is bounded here too, whichever surface sent it. */
function formatField(format: OutputFormat | undefined | null | ''): { format?: OutputFormat } {
  if (format && typeof format === 'object') checkSchemaBounds(format, 'format');
  return format === undefined || format === null || format === '' ? {} : { format };
}

type Observe = (event: InferenceEvent) => void;

/**
 * Reports a generation's first token (time since `started`, queue and load included), the gaps
 * between its tokens, and its token counts when it is done. Text never leaves this function.
 */
function observed(model: string, started: bigint, observe: Observe, source: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      let last: bigint | null = null;
      return {
        async next() {
          const r = await it.next();
          if (r.done) return r;
          const event = r.value;
          if (event.type === 'token') {
            const now = process.hrtime.bigint();
            if (last === null) observe({ type: 'first-token', model, seconds: Number(now - started) / 1e9 });
            else observe({ type: 'token-gap', model, seconds: Number(now - last) / 1e9 });
            last = now;
          } else if (event.type === 'done') {
            observe({ type: 'finished', model, promptTokens: event.promptTokens, completionTokens: event.completionTokens });
          }
          return r;
        },
        async return(value?: unknown) {
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}

/**
 * Gives the slot back as soon as the generation is over: on its `done` event, on an error, or when
 * the consumer stops iterating (also when it never started).
 */
function leased(lease: Lease, source: AsyncIterable<GenerationEvent>): AsyncIterable<GenerationEvent> {
  return {
    [Symbol.asyncIterator]() {
      const it = source[Symbol.asyncIterator]();
      return {
        async next() {
          try {
            const r = await it.next();
            if (r.done || r.value.type === 'done') lease.release();
            return r;
          } catch (err) {
            lease.release();
            throw err;
          }
        },
        async return(value?: unknown) {
          lease.release();
          await it.return?.();
          return { done: true as const, value: value as GenerationEvent };
        },
      };
    },
  };
}
