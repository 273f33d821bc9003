/**
 * Prompts as token lists. LlamaCompletion prepends BOS itself, so prompts are kept without it and
 * BOS is added only where the tokens must match what the sequence will hold (the cached-prefix
 * search, the prefill) and to count the prompt's length.
 *
 * @module
 */
import { LlamaText, type ChatHistoryItem, type ChatModelFunctions, type ChatWrapper, type LlamaModel, type Token } from 'node-llama-cpp';
import type { GenerateParams } from 'lia/engine';
import { ContextLengthError } from './errors.js';
import { renderGoTemplate } from 'lia/gguf';
import { withoutThinking, wrapperForGoTemplate, type PromptFormat } from './templates.js';

/**
 * A chat format's stop triggers, split by how they are best detected. node-llama-cpp stops on an
 * end-of-generation token by itself, so a trigger that is one such token is dropped; one made of
 * ordinary tokens ("<|im_end|>" in a vocabulary without that special token) is matched on the text
 * stream with the request's stop sequences (stops.ts), because the library's token triggers
 * re-tokenize the text they hold back and can lose a space, as they did for stop sequences; the
 * rest (special tokens that do not end generation) stay token triggers for the library. The speed
 * is the same either way (bench/results/2026-11-27-code-notes.md).
 */
export interface Stops {
  /** For the library's `customStopTriggers`. */
  tokens: LlamaText[];
  /** For the text-level detector. */
  texts: string[];
}

const NO_STOPS: Stops = { tokens: [], texts: [] };

/** A rendered conversation (see {@link Prompts.forChat}). */
export interface ChatPrompt {
  /** The messages rendered: the request's, less any that did not fit. */
  history: ChatHistoryItem[];
  /** The prompt without BOS. */
  tokens: Token[];
  /** The chat format's stop triggers (end of turn, EOS). */
  stops: Stops;
  /** The prompt's length as evaluated, BOS included. */
  promptTokens: number;
}

export class Prompts {
  constructor(
    readonly model: LlamaModel,
    readonly format: PromptFormat,
    readonly contextLength: number,
  ) {}

  /** The BOS token when the vocabulary wants one prepended, else null. */
  bos(): Token | null {
    return this.model.tokens.shouldPrependBosToken ? this.model.tokens.bos : null;
  }

  /** A templated prompt without its leading BOS. */
  withoutBos(tokens: Token[]): Token[] {
    const bos = this.bos();
    return bos !== null && tokens[0] === bos ? tokens.slice(1) : tokens;
  }

  /** The tokens LlamaCompletion evaluates: BOS (when the vocabulary wants it) + the prompt. */
  withBos(tokens: Token[]): Token[] {
    const bos = this.bos();
    return bos === null ? tokens : [bos, ...tokens];
  }

  /** The prompt's length as evaluated (BOS included); a 400 when it leaves no room in the context. */
  checkLength(tokens: Token[]): number {
    const promptTokens = this.#length(tokens);
    if (promptTokens >= this.contextLength) {
      throw new ContextLengthError(promptTokens, this.contextLength, this.model.trainContextSize);
    }
    return promptTokens;
  }

  #length(tokens: Token[]): number {
    return tokens.length + (this.bos() === null ? 0 : 1);
  }

  /**
   * A conversation's prompt in the model's chat format (without BOS), its stop triggers, and the
   * history it was rendered from; a 400 when it leaves no room in the context (the engine then
   * grows the context, or cuts the conversation once it cannot: its plan's context-fit.ts).
   * `think` false renders it with the model's thinking switched off where its format can (see
   * {@link wrapper}).
   */
  forChat(history: ChatHistoryItem[], functions?: ChatModelFunctions, think?: boolean): ChatPrompt {
    const { tokens, stops } = this.#render(this.wrapper(think), history, functions);
    return { history, tokens, stops, promptTokens: this.checkLength(tokens) };
  }

  /** A conversation's prompt length as evaluated (BOS included), whole: nothing dropped to fit. */
  count(history: ChatHistoryItem[], functions?: ChatModelFunctions, think?: boolean): number {
    return this.#length(this.#render(this.wrapper(think), history, functions).tokens);
  }

  /**
   * The model's chat format, with its thinking switched off when `think` is false and the format
   * can do that (templates.ts, `withoutThinking`); the variant is made once, on first use.
   */
  wrapper(think?: boolean): ChatWrapper {
    if (think !== false) return this.format.wrapper;
    if (this.#noThinking === undefined) this.#noThinking = withoutThinking(this.format.wrapper, this.model);
    return this.#noThinking ?? this.format.wrapper;
  }

  #noThinking: ChatWrapper | null | undefined;

  /**
   * The prompt of a generate request (without BOS) and the template's stop triggers: raw text, a
   * request `template` (rendered, or mapped to a known chat format), or the model's own format
   * (Ollama's default template for a model without one is `{{ .Prompt }}`).
   */
  forGenerate(params: GenerateParams): { tokens: Token[]; stops: Stops } {
    const plain = (text: string) => ({ tokens: this.model.tokenize(text, false, 'trimLeadingSpace'), stops: NO_STOPS });
    if (params.raw) return plain(params.prompt);
    let wrapper: ChatWrapper = this.wrapper(params.think);
    if (params.template !== undefined && params.template !== '') {
      const rendered = renderGoTemplate(params.template, { System: params.system, Prompt: params.prompt });
      if (rendered !== null) return plain(rendered);
      wrapper = wrapperForGoTemplate(params.template) ?? wrapper;
    } else if (this.format.untemplated) {
      return plain(params.prompt);
    }
    return this.#render(wrapper, [...(params.system ? [{ type: 'system' as const, text: params.system }] : []), { type: 'user', text: params.prompt }]);
  }

  /** `history` rendered by `wrapper` for the model's answer: the tokens (without BOS) and its stops. */
  #render(wrapper: ChatWrapper, history: ChatHistoryItem[], functions?: ChatModelFunctions): { tokens: Token[]; stops: Stops } {
    const state = wrapper.generateContextState({
      chatHistory: [...history, { type: 'model', response: [] }],
      ...(functions ? { availableFunctions: functions } : {}),
    });
    return { tokens: this.withoutBos(state.contextText.tokenize(this.model.tokenizer)), stops: this.#stops(state.stopGenerationTriggers) };
  }

  /** Splits a chat format's stop triggers (see {@link Stops}); cached per format, as they repeat. */
  #stops(triggers: readonly (string | LlamaText)[]): Stops {
    const key = JSON.stringify(triggers.map((t) => LlamaText(t).toJSON()));
    let split = this.#stopCache.get(key);
    if (split) return split;
    split = { tokens: [], texts: [] };
    for (const trigger of triggers) {
      const text = LlamaText(trigger);
      const tokens = text.tokenize(this.model.tokenizer, 'trimLeadingSpace');
      if (tokens.length === 0) continue;
      if (tokens.length === 1 && this.model.isEogToken(tokens[0])) continue;
      if (tokens.some((t) => this.model.isSpecialToken(t))) split.tokens.push(text);
      else split.texts.push(this.model.detokenize(tokens));
    }
    if (this.#stopCache.size < 16) this.#stopCache.set(key, split);
    return split;
  }

  readonly #stopCache = new Map<string, Stops>();
}
