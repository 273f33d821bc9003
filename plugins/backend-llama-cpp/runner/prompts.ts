/**
 * Prompts as token lists. LlamaCompletion prepends BOS itself, so prompts are kept without it and
 * BOS is added only where the tokens must match what the sequence will hold (the cached-prefix
 * search, the prefill) and to count the prompt's length.
 *
 * @module
 */
import type { ChatWrapper, LlamaModel, LlamaText, Token } from 'node-llama-cpp';
import type { GenerateParams } from '../../../core/contracts/backend.js';
import { RequestError } from './errors.js';
import { renderGoTemplate, wrapperForGoTemplate, type PromptFormat } from './templates.js';

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
    const promptTokens = tokens.length + (this.bos() === null ? 0 : 1);
    if (promptTokens >= this.contextLength) {
      throw new RequestError(`the prompt is ${promptTokens} tokens long; the context length is ${this.contextLength}`);
    }
    return promptTokens;
  }

  /**
   * The prompt of a generate request (without BOS) and the template's stop triggers: raw text, a
   * request `template` (rendered, or mapped to a known chat format), or the model's own format
   * (Ollama's default template for a model without one is `{{ .Prompt }}`).
   */
  forGenerate(params: GenerateParams): { tokens: Token[]; stops: (string | LlamaText)[] } {
    const plain = (text: string) => ({ tokens: this.model.tokenize(text, false, 'trimLeadingSpace'), stops: [] });
    if (params.raw) return plain(params.prompt);
    let wrapper: ChatWrapper = this.format.wrapper;
    if (params.template !== undefined && params.template !== '') {
      const rendered = renderGoTemplate(params.template, { System: params.system, Prompt: params.prompt });
      if (rendered !== null) return plain(rendered);
      wrapper = wrapperForGoTemplate(params.template) ?? wrapper;
    } else if (this.format.untemplated) {
      return plain(params.prompt);
    }
    const state = wrapper.generateContextState({
      chatHistory: [
        ...(params.system ? [{ type: 'system' as const, text: params.system }] : []),
        { type: 'user', text: params.prompt },
        { type: 'model', response: [] },
      ],
    });
    return { tokens: this.withoutBos(state.contextText.tokenize(this.model.tokenizer)), stops: state.stopGenerationTriggers };
  }
}
