/**
 * One streamed generation on each server under test, timed on the client side with the same
 * client (undici's `request` over open connections, bench/lib/connections.ts): the appliance's
 * `/api/generate` (raw prompt, NDJSON) and llama-server's `/completion` (SSE). Shared by the
 * engine benchmark (run.ts) and the shared-prompt benchmark (shared-prompt.ts).
 *
 * @module
 */
import type { Dispatcher } from 'undici';
import { timedPost } from '../lib/connections.js';
import { SAMPLING, type Stream } from './figures.js';

/** A streamed answer as undici's `request` gives it. */
type Answer = Dispatcher.ResponseData;

/** Reads a streamed answer line by line; `first` and `last` are when text lines arrived. */
export async function timeStream(res: Answer, parse: (line: string) => { text: boolean; tokens?: number }, t0: number): Promise<Stream> {
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${await res.body.text()}`);
  let first = 0;
  let last = 0;
  let count = 0;
  let reported: number | undefined;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (!line) continue;
      const p = parse(line);
      if (p.text) {
        const now = performance.now();
        if (first === 0) first = now;
        last = now;
        count++;
      }
      if (p.tokens !== undefined) reported = p.tokens;
    }
  }
  return { ttftMs: first - t0, decodeMs: last - first, tokens: reported ?? count, endMs: performance.now() };
}

/**
 * The appliance's `/api/generate` with a raw prompt, model `model`, Ollama's default sampling
 * (`options` over it), and the drafted and accepted tokens of the final chunk where it reports them.
 */
export async function applianceGenerate(
  app: { url: string; key: string },
  dispatcher: Dispatcher,
  model: string,
  prompt: string,
  predict: number,
  options: Record<string, unknown> = {},
): Promise<Stream & { drafted?: number; accepted?: number }> {
  const body = JSON.stringify({ model, prompt, raw: true, options: { ...SAMPLING, ...options, num_predict: predict } });
  const { res, t0 } = await timedPost(`${app.url}/api/generate`, { dispatcher, headers: { authorization: `Bearer ${app.key}` }, body });
  const drafts: { drafted?: number; accepted?: number } = {};
  const s = await timeStream(
    res,
    (line) => {
      const o = JSON.parse(line) as { done?: boolean; eval_count?: number; error?: string; draft_count?: number; draft_accepted_count?: number };
      if (o.error) throw new Error(o.error);
      if (o.done && o.draft_count !== undefined) Object.assign(drafts, { drafted: o.draft_count, accepted: o.draft_accepted_count ?? 0 });
      return { text: !o.done, ...(o.done ? { tokens: o.eval_count ?? 0 } : {}) };
    },
    t0,
  );
  return { ...s, ...drafts };
}

/** llama-server's `/completion` at `origin` with the same prompt and sampling (and `extra` fields, e.g. `lora`). */
export async function llamaServerGenerate(
  origin: string,
  dispatcher: Dispatcher,
  prompt: string,
  predict: number,
  extra: Record<string, unknown> = {},
): Promise<Stream> {
  const body = JSON.stringify({ prompt, stream: true, n_predict: predict, ...SAMPLING, ...extra });
  const { res, t0 } = await timedPost(`${origin}/completion`, { dispatcher, body });
  return timeStream(
    res,
    (line) => {
      if (!line.startsWith('data: ')) return { text: false };
      const o = JSON.parse(line.slice(6)) as { content?: string; stop?: boolean; tokens_predicted?: number };
      return { text: !o.stop, ...(o.stop ? { tokens: o.tokens_predicted ?? 0 } : {}) };
    },
    t0,
  );
}
