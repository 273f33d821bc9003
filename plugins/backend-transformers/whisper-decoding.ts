/**
 * The pure parts of decoding one window with a Whisper model, apart from the network: which
 * special tokens the folder's `generation_config.json` and tokenizer name, the tokens the
 * decoder starts from (the previous text after `<|startofprev|>`, then
 * `<|startoftranscript|>`), the steering of the first steps (the language, given or detected
 * from the language tokens' logits at the first step, then the task), and the reading of the
 * generated tokens into timed segments.
 *
 * Whisper's first steps are fixed by the request: `<|lang|>` (the hint, or the language the
 * model gives the highest logit among the language tokens right after
 * `<|startoftranscript|>`: its own language detection), `<|translate|>` or `<|transcribe|>`.
 * They are forced one step at a time by a logits processor rather than handed in with the
 * prefix, so detection needs no second pass over the encoder. Timestamp tokens then come as
 * Whisper writes them (`<|0.00|> text <|1.24|>`), under the library's own timestamp rules.
 *
 * @module
 */
import { Errors } from 'lia/plugin';
import { logSumExp, TokenScores } from './generation.js';

type Json = Record<string, unknown>;

/** The special tokens and rules of a Whisper model. */
export interface WhisperTokens {
  /** `<|endoftext|>`; every id below it is text. */
  eot: number;
  /** `<|startoftranscript|>`. */
  sot: number;
  /** `<|startofprev|>`, which introduces the previous text; absent when the model has none. */
  previous?: number;
  /** `<|notimestamps|>`; the timestamps follow it. Absent: the model writes no timestamps. */
  noTimestamps?: number;
  /** `<|nospeech|>` (or the older `<|nocaptions|>`), whose probability at the first step is `no_speech_prob`. */
  noSpeech?: number;
  transcribe?: number;
  translate?: number;
  /** Language code (`en`) → its token, for a multilingual model; empty for an English-only one. */
  languages: Map<string, number>;
  /** Tokens that may not open the text (`begin_suppress_tokens`: a bare space, `<|endoftext|>`). */
  beginSuppress: number[];
  /** Seconds per timestamp step (0.02: 30 s over 1500 encoder frames). */
  timePrecision: number;
  /** Most tokens the decoder takes, prefix included. */
  maxTokens: number;
}

function id(value: unknown): number | undefined {
  const v: unknown = Array.isArray(value) ? (value as unknown[])[0] : value;
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

/**
 * The tokens of a Whisper folder from its `generation_config.json` (`decoder_start_token_id`,
 * `eos_token_id`, `lang_to_id`, `task_to_id`, `no_timestamps_token_id`, `prev_sot_token_id`,
 * `begin_suppress_tokens`), `config.json` as a fallback, and the tokenizer's vocabulary
 * (`idOf`) for the tokens neither config names. Without a start or end token the model cannot
 * be run: an engine failure naming the file.
 */
export function whisperTokens(
  model: string,
  generation: Json,
  config: Json,
  idOf: (token: string) => number | undefined,
  shape: { timePrecision: number; maxTokens: number },
): WhisperTokens {
  const eot = id(generation['eos_token_id']) ?? id(config['eos_token_id']) ?? idOf('<|endoftext|>');
  const sot = id(generation['decoder_start_token_id']) ?? id(config['decoder_start_token_id']) ?? idOf('<|startoftranscript|>');
  if (eot === undefined || sot === undefined) {
    throw Errors.engineFailed(`model "${model}" cannot be loaded: generation_config.json names no decoder_start_token_id or eos_token_id`);
  }
  const languages = new Map<string, number>();
  const langToId = generation['lang_to_id'];
  const multilingual = generation['is_multilingual'] !== false;
  if (multilingual && langToId && typeof langToId === 'object') {
    for (const [token, value] of Object.entries(langToId as Json)) {
      const code = /^<\|([\w-]+)\|>$/.exec(token)?.[1];
      if (code && id(value) !== undefined) languages.set(code, id(value)!);
    }
  }
  const tasks = (generation['task_to_id'] ?? {}) as Json;
  const noTimestamps = id(generation['no_timestamps_token_id']) ?? idOf('<|notimestamps|>');
  const previous = id(generation['prev_sot_token_id']) ?? idOf('<|startofprev|>');
  const noSpeech = idOf('<|nospeech|>') ?? idOf('<|nocaptions|>');
  const transcribe = id(tasks['transcribe']) ?? idOf('<|transcribe|>');
  const translate = id(tasks['translate']) ?? idOf('<|translate|>');
  const suppress = generation['begin_suppress_tokens'] ?? config['begin_suppress_tokens'];
  return {
    eot,
    sot,
    ...(previous !== undefined ? { previous } : {}),
    ...(noTimestamps !== undefined ? { noTimestamps } : {}),
    ...(noSpeech !== undefined ? { noSpeech } : {}),
    ...(languages.size > 0 && transcribe !== undefined ? { transcribe } : {}),
    ...(languages.size > 0 && translate !== undefined ? { translate } : {}),
    languages,
    beginSuppress: Array.isArray(suppress) ? suppress.filter((x): x is number => id(x) !== undefined) : [],
    ...shape,
  };
}

/** What one window's decoding starts from. */
export interface WindowPlan {
  /** The tokens handed to the decoder: `<|startofprev|>` and the previous text when there is one, then `<|startoftranscript|>`. */
  prefix: number[];
  /** The tokens forced one step each after the prefix: the language (`null`: the one the model detects), then the task. */
  forced: (number | null)[];
  /** Whether the model writes timestamps (it has timestamp tokens). */
  timestamps: boolean;
}

/**
 * The plan of a window. `language` is an ISO-639-1 code (`en`, `de-AT` read as `de`), checked
 * against the model's languages (a 400 naming `language` for one it lacks); an English-only
 * model has no language or task token, so it ignores the hint and transcribes when asked to
 * translate, as a CTC model does. `prompt` is the previous text's tokens: the last ones that
 * fit in half the decoder's tokens, as Whisper keeps them.
 */
export function planWindow(
  tokens: WhisperTokens,
  { task, language, prompt = [] }: { task: 'transcribe' | 'translate'; language?: string | undefined; prompt?: number[] },
): WindowPlan {
  const prefix: number[] = [];
  const room = Math.floor(tokens.maxTokens / 2) - 1;
  if (tokens.previous !== undefined && prompt.length > 0 && room > 0) prefix.push(tokens.previous, ...prompt.slice(-room));
  prefix.push(tokens.sot);
  const forced: (number | null)[] = [];
  if (tokens.languages.size > 0) {
    forced.push(language === undefined ? null : languageToken(tokens, language));
    const taskToken = task === 'translate' ? tokens.translate : tokens.transcribe;
    if (taskToken !== undefined) forced.push(taskToken);
  }
  return { prefix, forced, timestamps: tokens.noTimestamps !== undefined };
}

/** The token of language `code`; a 400 naming `language` when the model has none. */
export function languageToken(tokens: WhisperTokens, code: string): number {
  const base = code.toLowerCase().split('-')[0]!;
  const token = tokens.languages.get(base);
  if (token === undefined) {
    throw Errors.badRequest(`language "${code}" is not one this model transcribes`, { param: 'language' });
  }
  return token;
}

/** The code of a language token (`en` for `<|en|>`). */
export function languageCode(tokens: WhisperTokens, token: number): string | undefined {
  for (const [code, t] of tokens.languages) if (t === token) return code;
  return undefined;
}

/**
 * Steers and scores one window's generation, step by step, through two logits processors:
 * {@link steer} (before the library's timestamp rules) detects or forces the language, forces
 * the task and keeps the text from opening with a token of `beginSuppress`; {@link record}
 * (after every other rule) remembers the log-probabilities the tokens were chosen from.
 */
export class WindowSteering {
  /** The language token written (given or detected), once the first step ran. */
  language: number | undefined;
  /** The probability of `<|nospeech|>` right after `<|startoftranscript|>` (0 when the model has no such token). */
  noSpeechProb = 0;
  readonly #scores = new TokenScores();

  constructor(
    private readonly tokens: WhisperTokens,
    private readonly plan: WindowPlan,
  ) {}

  /** Where `ids` (the sequence so far) stands: 0 is the first step after the prefix. */
  #step(ids: readonly unknown[]): number {
    return ids.length - this.plan.prefix.length;
  }

  steer(ids: readonly unknown[], logits: Float32Array): void {
    const step = this.#step(ids);
    if (step === 0 && this.tokens.noSpeech !== undefined) {
      this.noSpeechProb = Math.exp(logits[this.tokens.noSpeech]! - logSumExp(logits));
    }
    if (step < this.plan.forced.length) {
      let token = this.plan.forced[step]!;
      if (token === null) token = this.#detect(logits);
      if (step === 0 && this.tokens.languages.size > 0) this.language = token;
      logits.fill(-Infinity);
      logits[token] = 0;
      return;
    }
    if (step === this.plan.forced.length) for (const t of this.tokens.beginSuppress) if (t < logits.length) logits[t] = -Infinity;
  }

  /** The language token with the highest logit. */
  #detect(logits: Float32Array): number {
    let best = -1;
    for (const token of this.tokens.languages.values()) if (best < 0 || logits[token]! > logits[best]!) best = token;
    return best;
  }

  record(ids: readonly unknown[], logits: Float32Array): void {
    this.#scores.record(ids, logits, this.plan.prefix.length + this.plan.forced.length);
  }

  /** The generated tokens (after the forced ones, without the final `<|endoftext|>`) and their mean log probability. */
  finish(sequence: readonly number[]): { generated: number[]; avgLogprob: number } {
    const start = this.plan.prefix.length + this.plan.forced.length;
    const avgLogprob = this.#scores.mean(sequence, start);
    const generated = sequence.slice(start);
    if (generated.at(-1) === this.tokens.eot) generated.pop();
    return { generated, avgLogprob };
  }
}

/**
 * Whether a window holds no speech, by Whisper's own rule: `<|nospeech|>` was likelier than
 * 0.6 at the first step and the text chosen averages a log probability under -1 (what a model
 * writes into silence is unsure). Such a window's text is dropped.
 */
export function heardNothing(noSpeechProb: number, avgLogprob: number): boolean {
  return noSpeechProb > 0.6 && avgLogprob < -1;
}

/** A stretch of a window's text between two timestamps, in seconds from the window's start. */
export interface TimedTokens {
  start: number;
  end: number;
  /** Its text tokens (ids below `<|endoftext|>`). */
  ids: number[];
}

/**
 * The segments of a window's generated tokens, split at Whisper's timestamp tokens (ids after
 * `<|notimestamps|>`, each `timePrecision` seconds): `<|t0|> text <|t1|>` is a segment from t0
 * to t1, and a following `<|t1'|>` opens the next one. Text without a closing timestamp (a
 * window cut short) ends at `windowSeconds`; text without an opening one starts where the last
 * segment ended. Special tokens are dropped. Without timestamp tokens, one segment holds all.
 */
export function timedSegments(generated: readonly number[], tokens: WhisperTokens, windowSeconds: number): TimedTokens[] {
  const begin = tokens.noTimestamps === undefined ? Infinity : tokens.noTimestamps + 1;
  const out: TimedTokens[] = [];
  let start: number | undefined;
  let lastEnd = 0;
  let ids: number[] = [];
  for (const token of generated) {
    if (token >= begin) {
      const time = (token - begin) * tokens.timePrecision;
      if (ids.length > 0) {
        out.push({ start: start ?? lastEnd, end: Math.max(time, start ?? lastEnd), ids });
        ids = [];
        start = undefined;
        lastEnd = time;
      } else start = time;
    } else if (token < tokens.eot) ids.push(token);
  }
  if (ids.length > 0) out.push({ start: start ?? lastEnd, end: Math.max(windowSeconds, start ?? lastEnd), ids });
  return out;
}
