/**
 * A small upstream engine of the test's own, for the `backend-upstream` tests where an upstream
 * must misbehave or be observed precisely (a real appliance serves as upstream everywhere else).
 * Plain HTTP on 127.0.0.1, in one of the two flavours: OpenAI (`GET /v1/models`, `POST
 * /v1/chat/completions` answered as SSE) or Ollama (`GET /api/tags`, `POST /api/chat` answered as
 * NDJSON). It records every request (headers and JSON body) and whether the caller went away
 * before the answer was finished.
 *
 * What it answers depends on the last message's text:
 * - `stall`: nothing at all, not even the headers;
 * - `hang`: the headers and the first words (`held `), then nothing ever;
 * - `hold`: the first words, then nothing until {@link FakeUpstream.release}, then `by <name>`;
 * - anything else: a call of a tool when the request has tools (the one `tool_choice` names, else
 *   the first; with {@link CALL_ARGUMENTS}); else {@link STRUCTURED} as JSON text when it asks for
 *   structured output; else `from <name>`.
 *
 * {@link sseFrames} and {@link ndjsonLines} read LIA's own streamed answers on the client side.
 *
 * @module
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';

export type Flavour = 'openai' | 'ollama';

/** A request the fake upstream received. */
export interface Seen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
  /** True once its connection closed before the answer was finished: the caller went away. */
  aborted: boolean;
}

/** The arguments of the tool call the fake upstream makes. */
export const CALL_ARGUMENTS = { city: 'Paris', days: 2 };
/** The id the OpenAI flavour gives its tool call. */
export const CALL_ID = 'call_fake_1';
/** The answer to a request for structured output. */
export const STRUCTURED = { answer: 42 };

/** The wire format of one flavour's streamed answer. */
interface Writer {
  words(text: string): void;
  end(reason: string): void;
  toolCall(name: string, args: Record<string, unknown>): void;
}

function sseWriter(res: http.ServerResponse, model: string): Writer {
  const frame = (o: unknown) => res.write(`data: ${JSON.stringify(o)}\n\n`);
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
    frame({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created: 0, model, choices: [{ index: 0, delta, finish_reason: finish }] });
  const end = (reason: string) => {
    chunk({}, reason);
    frame({
      id: 'chatcmpl-fake',
      object: 'chat.completion.chunk',
      created: 0,
      model,
      choices: [],
      usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
    });
    res.end('data: [DONE]\n\n');
  };
  return {
    words: (text) => chunk({ content: text }),
    end,
    toolCall(name, args) {
      // As vLLM streams a call: the name first, the arguments in fragments.
      const json = JSON.stringify(args);
      chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: CALL_ID, type: 'function', function: { name, arguments: '' } }] });
      chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(0, 7) } }] });
      chunk({ tool_calls: [{ index: 0, function: { arguments: json.slice(7) } }] });
      end('tool_calls');
    },
  };
}

function ndjsonWriter(res: http.ServerResponse, model: string): Writer {
  const line = (message: Record<string, unknown>, done: Record<string, unknown> | null) =>
    JSON.stringify({ model, created_at: new Date().toISOString(), message: { role: 'assistant', content: '', ...message }, done: done !== null, ...done }) +
    '\n';
  const end = (reason: string) => res.end(line({}, { done_reason: reason, prompt_eval_count: 5, eval_count: 2 }));
  return {
    words: (text) => res.write(line({ content: text }, null)),
    end,
    toolCall(name, args) {
      res.write(line({ tool_calls: [{ function: { name, arguments: args } }] }, null));
      end('stop');
    },
  };
}

export class FakeUpstream {
  /** Every request but the model listings, in order. */
  readonly requests: Seen[] = [];
  /** The model listings (health checks and discovery). */
  readonly listings: Seen[] = [];
  /** Its base URL, once started. */
  url = '';
  #server: http.Server | null = null;
  #released = false;
  readonly #waiting = new Set<() => void>();

  /** @param models what it lists in its model listing (the listing may change while it runs). */
  constructor(
    readonly name: string,
    readonly flavour: Flavour,
    public models: string[] = [],
  ) {}

  async start(): Promise<this> {
    const server = http.createServer((req, res) => {
      this.#serve(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    this.#server = server;
    return this;
  }

  /** The requests it received for a chat (not the listings). */
  chats(): Seen[] {
    return this.requests.filter((r) => r.method === 'POST');
  }

  /** Ends every `hold` answer, those waiting and those still to come. */
  release(): void {
    this.#released = true;
    for (const go of this.#waiting) go();
    this.#waiting.clear();
  }

  /** Requests waiting for {@link release}. */
  get held(): number {
    return this.#waiting.size;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = null;
    this.release();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  async #serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const parts: Buffer[] = [];
    for await (const part of req) parts.push(part as Buffer);
    const text = Buffer.concat(parts).toString('utf8');
    const seen: Seen = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: {}, aborted: false };
    res.on('close', () => {
      if (!res.writableFinished) seen.aborted = true;
    });
    try {
      seen.body = text === '' ? {} : (JSON.parse(text) as Seen['body']);
    } catch {
      this.requests.push(seen);
      res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not JSON"}');
      return;
    }

    const openai = this.flavour === 'openai';
    if (req.method === 'GET' && req.url === (openai ? '/v1/models' : '/api/tags')) {
      this.listings.push(seen);
      const listing = openai
        ? { object: 'list', data: this.models.map((id) => ({ id, object: 'model', created: 0, owned_by: 'test' })) }
        : { models: this.models.map((name) => ({ name, model: name, modified_at: new Date(0).toISOString(), size: 1, digest: 'f'.repeat(64), details: {} })) };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(listing));
      return;
    }
    this.requests.push(seen);
    if (req.method !== 'POST' || req.url !== (openai ? '/v1/chat/completions' : '/api/chat')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      return;
    }

    const messages = (seen.body['messages'] ?? []) as Array<{ content?: unknown }>;
    const last = messages.at(-1)?.content;
    const cue = typeof last === 'string' ? last : '';
    if (cue === 'stall') return; // nothing, not even the headers

    res.writeHead(200, { 'content-type': openai ? 'text/event-stream' : 'application/x-ndjson' });
    const out = openai ? sseWriter(res, String(seen.body['model'])) : ndjsonWriter(res, String(seen.body['model']));
    if (cue === 'hang' || cue === 'hold') {
      out.words('held ');
      if (cue === 'hang') return;
      if (!this.#released) await new Promise<void>((resolve) => this.#waiting.add(resolve));
      if (seen.aborted) return;
      out.words(`by ${this.name}`);
      out.end('stop');
      return;
    }
    const tools = seen.body['tools'] as Array<{ function: { name: string } }> | undefined;
    const forced = (seen.body['tool_choice'] as { function?: { name?: string } } | undefined)?.function?.name;
    if (tools?.length) return out.toolCall(forced ?? tools[0]!.function.name, CALL_ARGUMENTS);
    const structured = seen.body['response_format'] !== undefined || seen.body['format'] !== undefined;
    out.words(structured ? JSON.stringify(STRUCTURED) : `from ${this.name}`);
    out.end('stop');
  }
}

/** The JSON frames of an SSE answer, in order (`[DONE]` and comments left out). */
export function sseFrames(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:') && l.slice(5).trim() !== '[DONE]')
    .map((l) => JSON.parse(l.slice(5)) as Record<string, unknown>);
}

/** The objects of an NDJSON answer, in order. */
export function ndjsonLines(text: string): Array<Record<string, unknown>> {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The plugins an appliance in front of upstreams leaves out: no local backend, no host probes, no console. */
export const FRONT_UNUSED = {
  'host-network': false,
  'host-gpu': false,
  'host-services': false,
  webui: false,
  'backend-transformers': false,
  'backend-llama-cpp': false,
} as const;

/**
 * Starts an appliance whose `backend-upstream` serves `upstreams` (the plugin's option list), with
 * health checks every 200 ms so that a test sees a replica come back without waiting long.
 */
export function startFront(upstreams: object[], plugins: Record<string, unknown> = {}): Promise<TestAppliance> {
  return startTestAppliance({ plugins: { ...FRONT_UNUSED, ...plugins, 'backend-upstream': { options: { health_interval_ms: 200, upstreams } } } });
}
