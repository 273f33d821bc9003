/**
 * Conformance checks against the official OpenAI API description
 * (`../shared/spec/openai-openapi.yaml`, openai/openai-openapi at f85dbe2).
 *
 * The file is OpenAPI 3.1 but still carries OAS 3.0 idioms that ajv rejects or misreads, so a
 * pre-pass smooths them over before compiling:
 * `nullable: true` becomes a `null` type / enum member (or an `anyOf` with `null` when there is
 * no `type`), `Embedding.embedding` also accepts a base64 string, and a streamed legacy completion
 * chunk may carry `finish_reason: null` (OpenAI streams it; the spec has no chunk schema for
 * `/completions`, so {@link COMPLETION_CHUNK} is `CreateCompletionResponse` with that one change).
 *
 * The Responses API streams named events (`event: response.output_text.delta`), not chunks: its
 * streams are checked by {@link checkResponseSse} against the `ResponseStreamEvent` union, each
 * event's failures reported from the one schema its `type` names.
 *
 * {@link validateOpenAI} checks one payload; {@link schemaCheckedFetch} wraps `fetch` for the
 * `openai` npm client so that every response body and every SSE chunk it receives is validated
 * on the way through, and the failures are collected for the test to assert on.
 *
 * @module
 */
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { fileURLToPath } from 'node:url';

/** The response schemas of the spec that `/v1/` answers must satisfy. */
export type OpenAISchemaName =
  | 'CreateChatCompletionResponse'
  | 'CreateChatCompletionStreamResponse'
  | 'CreateCompletionResponse'
  | 'CreateEmbeddingResponse'
  | 'ListModelsResponse'
  | 'Model'
  | 'ErrorResponse'
  | 'Response'
  | 'ResponseStreamEvent'
  | typeof COMPLETION_CHUNK;

/** Name of the derived schema for streamed `text_completion` chunks (finish_reason may be null). */
export const COMPLETION_CHUNK = 'CompletionStreamChunk' as const;

type Json = unknown;

/** `../shared/spec/openai-openapi.yaml` relative to the project root. */
const SPEC_PATH = fileURLToPath(new URL('../../../shared/spec/openai-openapi.yaml', import.meta.url));

/** Applies the `nullable` and base64 fixes in place over a parsed `components` tree. */
function smooth(node: Json): Json {
  if (Array.isArray(node)) return node.map(smooth);
  if (node === null || typeof node !== 'object') return node;
  const obj = node as Record<string, Json>;
  for (const [k, v] of Object.entries(obj)) obj[k] = smooth(v);
  if (obj.nullable === true) {
    delete obj.nullable;
    if (Array.isArray(obj.enum) && !obj.enum.includes(null)) obj.enum = [...obj.enum, null];
    if (typeof obj.type === 'string') obj.type = [obj.type, 'null'];
    else if (obj.type === undefined) return { anyOf: [obj, { type: 'null' }] };
  }
  return obj;
}

interface Components {
  schemas: Record<string, Record<string, any>>;
}

function buildAjv(): Ajv2020 {
  let text: string;
  try {
    text = readFileSync(SPEC_PATH, 'utf8');
  } catch (err) {
    throw new Error(`the OpenAI spec fixture is missing at ${SPEC_PATH} (../shared/spec/openai-openapi.yaml)`, { cause: err });
  }
  const spec = parse(text) as { components: Components };
  const components = smooth(spec.components) as Components;
  const schemas = components.schemas;

  const embedding = schemas.Embedding!.properties.embedding;
  schemas.Embedding!.properties.embedding = { anyOf: [embedding, { type: 'string', contentEncoding: 'base64' }] };

  const chunk = structuredClone(schemas.CreateCompletionResponse!);
  const finish = chunk.properties.choices.items.properties.finish_reason;
  finish.type = [finish.type, 'null'];
  finish.enum = [...finish.enum, null];
  schemas[COMPLETION_CHUNK] = chunk;

  // The Responses stream: which member of the event union each `type` is.
  for (const member of schemas.ResponseStreamEvent!.anyOf as { $ref: string }[]) {
    const name = member.$ref.split('/').at(-1)!;
    const type = schemas[name]?.properties?.type?.enum?.[0];
    if (typeof type === 'string') streamEventSchemas.set(type, name);
  }

  const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => void;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
  addFormats(ajv);
  ajv.addFormat('unixtime', true);
  for (const f of ['int64', 'int32', 'float', 'double', 'binary']) ajv.addFormat(f, true);
  ajv.addSchema({ $id: 'openai', components }, 'openai');
  return ajv;
}

let ajv: Ajv2020 | undefined;
const compiled = new Map<string, ValidateFunction>();
/** Responses stream event `type` → the name of its schema in the union. */
const streamEventSchemas = new Map<string, string>();

function validatorFor(name: string): ValidateFunction {
  let fn = compiled.get(name);
  if (!fn) {
    ajv ??= buildAjv();
    fn = ajv.getSchema(`openai#/components/schemas/${name}`);
    if (!fn) throw new Error(`no schema ${name} in the OpenAI spec`);
    compiled.set(name, fn);
  }
  return fn;
}

/**
 * Validates a payload against a named schema. Returns the list of violations (empty when the
 * payload conforms), each as `path message`.
 */
export function validateOpenAI(name: OpenAISchemaName, payload: unknown): string[] {
  const fn = validatorFor(name);
  if (fn(payload)) return [];
  return (fn.errors ?? []).map((e) => `${name}${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
}

/** Which schema a `/v1/` response body (or chunk, when `chunk`) must satisfy. */
export function schemaForPath(method: string, path: string, status: number, chunk: boolean): OpenAISchemaName | null {
  if (status >= 400) return 'ErrorResponse';
  const p = path.replace(/\/+/g, '/').replace(/\/$/, '');
  if (method === 'POST' && p.endsWith('/v1/chat/completions')) {
    return chunk ? 'CreateChatCompletionStreamResponse' : 'CreateChatCompletionResponse';
  }
  if (method === 'POST' && p.endsWith('/v1/completions')) return chunk ? COMPLETION_CHUNK : 'CreateCompletionResponse';
  if (method === 'POST' && p.endsWith('/v1/responses')) return chunk ? 'ResponseStreamEvent' : 'Response';
  if (method === 'POST' && p.endsWith('/v1/embeddings')) return 'CreateEmbeddingResponse';
  if (method === 'GET' && p.endsWith('/v1/models')) return 'ListModelsResponse';
  if (method === 'GET' && /\/v1\/models\/.+/.test(p)) return 'Model';
  return null;
}

/** Splits an SSE body into its `data:` payloads (comments and blank lines dropped). */
export function sseData(body: string): string[] {
  const out: string[] = [];
  for (const event of body.split(/\r?\n\r?\n/)) {
    const lines = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''));
    if (lines.length > 0) out.push(lines.join('\n'));
  }
  return out;
}

/** The outcome of validating one SSE body: the parsed chunks and the framing and schema failures. */
export interface SseCheck {
  chunks: Record<string, any>[];
  failures: string[];
  /** True when the stream ended with `data: [DONE]` and nothing after it. */
  done: boolean;
}

/** Validates every chunk of an SSE body against `schema`, and its framing (`[DONE]` last, no `event:`). */
export function checkSse(body: string, schema: OpenAISchemaName): SseCheck {
  const failures: string[] = [];
  if (/^event:/m.test(body)) failures.push('SSE stream carries event: lines');
  const data = sseData(body);
  const doneAt = data.indexOf('[DONE]');
  if (doneAt !== -1 && doneAt !== data.length - 1) failures.push('data after [DONE]');
  const chunks: Record<string, any>[] = [];
  for (const d of data) {
    if (d === '[DONE]') continue;
    let chunk: Record<string, any>;
    try {
      chunk = JSON.parse(d);
    } catch {
      failures.push(`chunk is not JSON: ${d.slice(0, 80)}`);
      continue;
    }
    chunks.push(chunk);
    failures.push(...validateOpenAI(chunk.error ? 'ErrorResponse' : schema, chunk));
  }
  return { chunks, failures, done: doneAt === data.length - 1 && doneAt !== -1 };
}

/**
 * Validates one Responses stream event against the `ResponseStreamEvent` union; when it fails,
 * the violations are those of the member its `type` names (an unknown `type` is one itself).
 */
export function validateStreamEvent(event: Record<string, any>): string[] {
  const type: unknown = event.type;
  if (validatorFor('ResponseStreamEvent')(event)) return [];
  const member = streamEventSchemas.get(String(type));
  if (!member) return [`ResponseStreamEvent: unknown event type ${JSON.stringify(type)}`];
  const fn = validatorFor(member);
  if (fn(event)) return [`${member}: valid alone but not as a ResponseStreamEvent`];
  return (fn.errors ?? []).map((e) => `${member}${e.instancePath || '/'} ${e.message ?? 'is invalid'}`);
}

/** The outcome of checking a Responses stream: its events and the framing and schema failures. */
export interface ResponseSseCheck {
  events: Record<string, any>[];
  failures: string[];
}

/**
 * Checks a Responses stream: every frame is `event: <type>` + `data: <json>` whose `type` is the
 * event name and whose `sequence_number` counts from 0 without gaps, no `[DONE]`, the stream opens
 * with `response.created` and ends with `response.completed`, `response.incomplete`,
 * `response.failed` or `error`, and every event conforms.
 */
export function checkResponseSse(body: string): ResponseSseCheck {
  const failures: string[] = [];
  const events: Record<string, any>[] = [];
  for (const frame of body.split(/\r?\n\r?\n/).filter((f) => f.trim() !== '')) {
    const lines = frame.split(/\r?\n/);
    const name = lines
      .find((l) => l.startsWith('event:'))
      ?.slice(6)
      .trim();
    const data = lines
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '[DONE]') {
      failures.push('a Responses stream carries data: [DONE]');
      continue;
    }
    let event: Record<string, any>;
    try {
      event = JSON.parse(data);
    } catch {
      failures.push(`event is not JSON: ${data.slice(0, 80)}`);
      continue;
    }
    if (name !== event.type) failures.push(`event: line ${JSON.stringify(name)} does not name the type ${JSON.stringify(event.type)}`);
    if (event.sequence_number !== events.length) failures.push(`${event.type}: sequence_number ${event.sequence_number}, expected ${events.length}`);
    events.push(event);
    failures.push(...validateStreamEvent(event));
  }
  if (events[0]?.type !== 'response.created') failures.push(`the stream opens with ${events[0]?.type}, not response.created`);
  const last = events.at(-1)?.type;
  if (!['response.completed', 'response.incomplete', 'response.failed', 'error'].includes(last)) failures.push(`the stream ends with ${last}`);
  return { events, failures };
}

/** A fetch for the `openai` client that validates everything it receives. */
export interface CheckedFetch {
  fetch: (input: any, init?: any) => Promise<Response>;
  /** Schema or framing violations seen so far, each prefixed with the request. */
  readonly failures: string[];
  /** How many bodies and chunks were validated. */
  readonly checked: number;
  /** Resolves once every body received so far has been read and validated. */
  settle(): Promise<void>;
  /** Settles, then returns the failures and count since the last drain and resets both. */
  drain(): Promise<{ failures: string[]; checked: number }>;
}

/**
 * Wraps undici's fetch (with `dispatcher`, which trusts the test CA) so that each `/v1/`
 * response body, and each chunk of an SSE body, is validated against its schema. Bodies are
 * teed, so the client reads them unchanged.
 */
export function schemaCheckedFetch(dispatcher: Dispatcher): CheckedFetch {
  const failures: string[] = [];
  let checked = 0;
  const pending: Promise<void>[] = [];
  const check = async (method: string, url: string, res: Response): Promise<void> => {
    const sse = (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
    const schema = schemaForPath(method, new URL(url).pathname, res.status, sse);
    if (!schema) return;
    const text = await res.text();
    const where = `${method} ${new URL(url).pathname} ${res.status}`;
    if (sse && schema === 'ResponseStreamEvent') {
      const result = checkResponseSse(text);
      checked += result.events.length;
      failures.push(...result.failures.map((f) => `${where}: ${f}`));
      return;
    }
    if (sse) {
      const result = checkSse(text, schema);
      checked += result.chunks.length;
      if (!result.done) failures.push(`${where}: stream did not end with data: [DONE]`);
      failures.push(...result.failures.map((f) => `${where}: ${f}`));
      return;
    }
    checked += 1;
    if (!(res.headers.get('content-type') ?? '').includes('application/json')) {
      failures.push(`${where}: content-type is ${res.headers.get('content-type')}`);
    }
    try {
      failures.push(...validateOpenAI(schema, JSON.parse(text)).map((f) => `${where}: ${f}`));
    } catch {
      failures.push(`${where}: body is not JSON`);
    }
  };
  const wrapped = async (input: any, init?: any): Promise<Response> => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const method = String(init?.method ?? 'GET').toUpperCase();
    // undici's own fetch does not know Node's global FormData (the SDKs' multipart uploads): the
    // body goes as the bytes and boundary the platform encodes it to.
    if (init?.body instanceof globalThis.FormData) {
      const encoded = new Response(init.body as FormData);
      const headers = Object.fromEntries(new Headers(init.headers as HeadersInit).entries());
      headers['content-type'] = encoded.headers.get('content-type')!;
      init = { ...init, headers, body: Buffer.from(await encoded.arrayBuffer()) };
    }
    const res = (await undiciFetch(url, { ...init, dispatcher })) as unknown as Response;
    if (!res.body || [101, 204, 205, 304].includes(res.status)) return res;
    const [mine, theirs] = res.body.tee();
    const copy = new Response(mine, { status: res.status, headers: res.headers });
    const aborted = () => (init?.signal as AbortSignal | undefined)?.aborted === true;
    pending.push(
      check(method, url, copy).catch((err) => {
        // A body the client itself aborted is not a server failure.
        if (!aborted()) failures.push(`${method} ${url}: ${err}`);
      }),
    );
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  return {
    fetch: wrapped,
    get failures() {
      return failures;
    },
    get checked() {
      return checked;
    },
    async settle() {
      while (pending.length > 0) await Promise.all(pending.splice(0));
    },
    async drain() {
      await this.settle();
      const out = { failures: failures.splice(0), checked };
      checked = 0;
      return out;
    },
  };
}

// Compile every validator when the helper is imported: compiling takes seconds of blocked event
// loop, and doing it lazily in the middle of a test stalls the appliance it shares a process with
// long enough for keep-alive sockets to be reset.
for (const name of [
  'CreateChatCompletionResponse',
  'CreateChatCompletionStreamResponse',
  'CreateCompletionResponse',
  'CreateEmbeddingResponse',
  'ListModelsResponse',
  'Model',
  'ErrorResponse',
  'Response',
  'ResponseStreamEvent',
  COMPLETION_CHUNK,
] as const) {
  validatorFor(name);
}
