/**
 * The legacy `POST /v1/completions`: body → one {@link InferenceGenerateRequest} per prompt, and
 * events → `text_completion` objects (the streamed and the whole response share that shape).
 *
 * The prompt is continued as raw text (no chat template), as OpenAI, llama.cpp and vLLM do; with
 * `suffix` the request is a fill-in-the-middle insert, which the engine renders with the model's
 * template (`raw: false`), as Ollama does. `max_tokens` defaults to 16, the OpenAI default.
 * `echo` prepends the prompt to the text. An array of prompts gives one choice per prompt
 * (`index` = position). Token-array prompts, `logprobs`, `best_of` > 1 and `n` > 1 are a 400.
 *
 * @module
 */
import type { GenerationEvent, InferenceGenerateRequest } from 'lia/plugin';
import { samplingOptions, streamFlags } from './chat-request.js';
import { usageOf, type Usage } from './chat-response.js';
import { invalid, singleChoice } from './fields.js';
import type { CompletionBody } from './schemas.js';
import { envelope, type ResponseMeta } from './ids.js';

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
  if (body.logprobs != null && body.logprobs > 0) invalid('logprobs', "'logprobs' is not supported by this server");
  const suffix = body.suffix ?? undefined;
  const options = samplingOptions(body, body.max_tokens ?? DEFAULT_COMPLETION_TOKENS);
  const natives = list.map((prompt): InferenceGenerateRequest => {
    const native: InferenceGenerateRequest = { model: body.model, prompt, raw: !suffix, options: { ...options } };
    if (suffix) native.suffix = suffix;
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
  choices: { text: string; index: number; logprobs: null; finish_reason: CompletionFinishReason | null }[];
  usage?: Usage;
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

/** Adds up usages (one per prompt). */
export function sumUsage(list: Usage[]): Usage {
  const u = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };
  for (const x of list) {
    u.prompt_tokens += x.prompt_tokens;
    u.completion_tokens += x.completion_tokens;
    u.total_tokens += x.total_tokens;
  }
  return u;
}

/** One prompt's text, finish reason and usage, from its events. */
export class CompletionCollector {
  text: string;
  reason: CompletionFinishReason = 'stop';
  usage: Usage = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 };

  constructor(echoPrefix = '') {
    this.text = echoPrefix;
  }

  add(event: GenerationEvent): void {
    if (event.type === 'token') this.text += event.text;
    else if (event.type === 'done') {
      this.reason = event.reason;
      this.usage = usageOf(event);
    }
  }
}
