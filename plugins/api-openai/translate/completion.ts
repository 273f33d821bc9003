/**
 * The legacy `POST /v1/completions`: body → one {@link InferenceGenerateRequest} per prompt, and
 * events → `text_completion` objects (the streamed and the whole response share that shape).
 *
 * The prompt is continued as raw text (no chat template), as OpenAI, llama.cpp and vLLM do; with
 * `suffix` the request is a fill-in-the-middle insert, which the engine renders with the model's
 * template (`raw: false`), as Ollama does. `max_tokens` defaults to 16, the OpenAI default.
 * `echo` prepends the prompt to the text. An array of prompts gives one choice per prompt
 * (`index` = position). `logprobs: N` returns the legacy logprobs object (each token, its logprob,
 * its N most likely alternatives and its offset in the choice's text). Token-array prompts, `echo`
 * with `logprobs` (the prompt's own logprobs are not computed), `best_of` > 1 and `n` > 1 are a 400.
 *
 * @module
 */
import type { GeneratedLogprob, GenerationEvent, InferenceGenerateRequest } from 'lia/engine';
import { samplingOptions, streamFlags } from './chat-request.js';
import { usageOf, type Usage } from './chat-response.js';
import { envelope, invalid, singleChoice, type ResponseMeta } from './shared.js';
import type { CompletionBody } from './schemas.js';

/** OpenAI's default `max_tokens` for legacy completions. */
export const DEFAULT_COMPLETION_TOKENS = 16;

/** A translated completion request. */
export interface CompletionTranslation {
  /** One native request per prompt, in order. */
  natives: InferenceGenerateRequest[];
  prompts: string[];
  echo: boolean;
  stream: boolean;
  includeUsage: boolean;
}

/** `prompt` as a list of texts; token arrays are refused with their own message. */
function prompts(value: CompletionBody['prompt']): string[] {
  if (typeof value === 'string') return [value];
  return value.map((p, i) => {
    if (typeof p === 'string') return p;
    if (typeof p === 'number' || Array.isArray(p)) {
      invalid('prompt', 'token-array prompts are not supported: send the prompt as text');
    }
    return invalid(`prompt[${i}]`, `'prompt[${i}]' must be a string`);
  });
}

/** Translates a completion body (checked by its route schema); throws a 400 with `param` for what the schema cannot rule. */
export function translateCompletionRequest(body: CompletionBody): CompletionTranslation {
  const list = prompts(body.prompt);
  singleChoice(body.n);
  if (body.best_of != null && body.best_of > 1) invalid('best_of', "'best_of' > 1 is not supported");
  if (body.logprobs != null && body.echo) invalid('echo', "'echo' cannot be combined with 'logprobs'");
  const suffix = body.suffix ?? undefined;
  const options = samplingOptions(body, body.max_tokens ?? DEFAULT_COMPLETION_TOKENS);
  const natives = list.map((prompt): InferenceGenerateRequest => {
    const native: InferenceGenerateRequest = { model: body.model, prompt, raw: !suffix, options: { ...options } };
    if (suffix) native.suffix = suffix;
    if (body.logprobs != null) native.logprobs = body.logprobs;
    return native;
  });
  return { natives, prompts: list, echo: body.echo ?? false, ...streamFlags(body) };
}

/** OpenAI's `finish_reason` for completions. */
export type CompletionFinishReason = 'stop' | 'length';

/** A `text_completion` object (whole response or stream chunk). */
export interface TextCompletion {
  id: string;
  object: 'text_completion';
  created: number;
  model: string;
  system_fingerprint: string;
  choices: { text: string; index: number; logprobs: CompletionLogprobs | null; finish_reason: CompletionFinishReason | null }[];
  usage?: Usage;
}

/** The legacy logprobs object: parallel lists, one item per token. */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  /** Each token's alternatives as `{token: logprob}`, most likely first. */
  top_logprobs: Record<string, number>[];
  /** Where each token starts in the choice's text (characters). */
  text_offset: number[];
}

/** Native logprob entries → the legacy object; `offset` is where the first token starts in the choice's text. */
export function legacyLogprobs(entries: readonly GeneratedLogprob[], offset: number): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const e of entries) {
    out.tokens.push(e.token);
    out.token_logprobs.push(e.logprob);
    out.top_logprobs.push(Object.fromEntries(e.top_logprobs.map((t) => [t.token, t.logprob])));
    out.text_offset.push(at);
    at += e.token.length;
  }
  return out;
}

/** Builds a `text_completion` object. */
export function textCompletion(meta: ResponseMeta, choices: TextCompletion['choices'], usage?: Usage): TextCompletion {
  const out: TextCompletion = {
    ...envelope(meta, 'text_completion'),
    choices,
  };
  if (usage) out.usage = usage;
  return out;
}

/** Adds up usages (one per prompt), their speculative decoding's details too where they have them. */
export function sumUsage(list: Usage[]): Usage {
  const u: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  for (const x of list) {
    u.prompt_tokens += x.prompt_tokens;
    u.completion_tokens += x.completion_tokens;
    u.total_tokens += x.total_tokens;
    const d = x.completion_tokens_details;
    if (d) {
      const sum = (u.completion_tokens_details ??= { accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 });
      sum.accepted_prediction_tokens += d.accepted_prediction_tokens;
      sum.rejected_prediction_tokens += d.rejected_prediction_tokens;
    }
  }
  return u;
}

/** One prompt's text, finish reason and usage, from its events. */
export class CompletionCollector {
  text: string;
  reason: CompletionFinishReason = 'stop';
  usage: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  /** Every token's logprob entry, when the request asked for them (else null). */
  readonly logprobs: GeneratedLogprob[] | null;

  constructor(echoPrefix = '', logprobs = false) {
    this.text = echoPrefix;
    this.logprobs = logprobs ? [] : null;
  }

  add(event: GenerationEvent): void {
    if (event.type === 'token') {
      this.text += event.text;
      if (event.logprobs) this.logprobs?.push(...event.logprobs);
    } else if (event.type === 'done') {
      this.reason = event.reason;
      this.usage = usageOf(event);
    }
  }
}
