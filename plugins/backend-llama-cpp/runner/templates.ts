/**
 * Chat-template resolution. Order, as documented in docs/engine.md:
 *
 * 1. the Jinja template stored in the GGUF (`tokenizer.chat_template`), through node-llama-cpp's
 *    resolver, which prefers a specialised wrapper that renders identically;
 * 2. the store's template layer (Ollama Go-template text): the common families (ChatML, Llama 3,
 *    Llama 2, Mistral, Gemma) map onto node-llama-cpp's wrappers; a simple template that only uses
 *    `.System`, `.Prompt` and `.Response` is rendered as it is (`renderGoTemplate` of lia/utils);
 * 3. ChatML, the last resort.
 *
 * @module
 */
import {
  ChatMLChatWrapper,
  GemmaChatWrapper,
  JinjaTemplateChatWrapper,
  Llama2ChatWrapper,
  Llama3ChatWrapper,
  MistralChatWrapper,
  QwenChatWrapper,
  resolveChatWrapper,
  type ChatWrapper,
  type LlamaModel,
} from 'node-llama-cpp';
import { goTemplateFamily, type TemplateFamily } from 'lia/gguf';

function wrapperForFamily(family: TemplateFamily): ChatWrapper {
  switch (family) {
    case 'chatml':
      return new ChatMLChatWrapper();
    case 'llama3':
      return new Llama3ChatWrapper();
    case 'gemma':
      return new GemmaChatWrapper();
    case 'llama2':
      return new Llama2ChatWrapper();
    case 'mistral':
      return new MistralChatWrapper();
  }
}

/** How a model formats prompts: a chat wrapper, or plain text when it has no template at all. */
export interface PromptFormat {
  wrapper: ChatWrapper;
  /** Where the wrapper came from, for the log and docs. */
  source: 'gguf' | 'store' | 'fallback';
  /** True when neither the GGUF nor the store has a template (generate passes the prompt through). */
  untemplated: boolean;
}

/**
 * Picks the chat wrapper of a loaded model. `known` is what an earlier load of the same file
 * resolved to (see `LoadSpec.knownChatWrapper`): with `JinjaTemplate`, the GGUF template is used
 * as it is, skipping the comparison with every specialised wrapper, which renders the template
 * dozens of times (about a second on a small CPU) only to find again that none matches.
 */
export function resolvePromptFormat(model: LlamaModel, storeTemplate: string | undefined, known?: 'JinjaTemplate'): PromptFormat {
  const jinja = model.fileInfo.metadata.tokenizer?.chat_template;
  if (typeof jinja === 'string' && jinja.trim() !== '') {
    const wrapper =
      known === 'JinjaTemplate'
        ? resolveChatWrapper({
            type: 'jinjaTemplate',
            tokenizer: model.tokenizer,
            fileInfo: model.fileInfo,
            bosString: model.tokens.bosString,
            filename: model.filename,
            fallbackToOtherWrappersOnJinjaError: true,
            warningLogs: false,
          })
        : resolveChatWrapper(model, { fallbackToOtherWrappersOnJinjaError: true, warningLogs: false });
    if (wrapper) return { wrapper, source: 'gguf', untemplated: false };
  }
  if (storeTemplate && storeTemplate.trim() !== '') {
    const family = goTemplateFamily(storeTemplate);
    if (family) return { wrapper: wrapperForFamily(family), source: 'store', untemplated: false };
  }
  return { wrapper: new ChatMLChatWrapper(), source: 'fallback', untemplated: !storeTemplate };
}

/** Whether a chat format has a thought section (Qwen3, DeepSeek-R1, gpt-oss, ...). */
export function hasThoughts(wrapper: ChatWrapper): boolean {
  return wrapper.settings.segments?.thought !== undefined;
}

/**
 * The same chat format with the model's thinking switched off, as the model's own template does
 * it: Qwen's wrapper with `thoughts: "discourage"` (an empty `<think>\n\n</think>\n\n` opens the
 * answer, what Qwen3's template renders for `enable_thinking=false`), a GGUF Jinja template
 * rendered with `enable_thinking=false`. Null for formats that cannot switch it off (their models
 * think anyway, as gpt-oss and DeepSeek-R1 do under Ollama).
 */
export function withoutThinking(wrapper: ChatWrapper, model: LlamaModel): ChatWrapper | null {
  if (wrapper instanceof QwenChatWrapper) {
    return new QwenChatWrapper({ variation: wrapper.variation, keepOnlyLastThought: wrapper.keepOnlyLastThought, thoughts: 'discourage' });
  }
  const jinja = model.fileInfo.metadata.tokenizer?.chat_template;
  if (wrapper instanceof JinjaTemplateChatWrapper && typeof jinja === 'string') {
    try {
      return new JinjaTemplateChatWrapper({ template: jinja, tokenizer: model.tokenizer, reasoning: false });
    } catch {
      return null;
    }
  }
  return null;
}

/** A wrapper for a request's own Go template, when it belongs to a known family. */
export function wrapperForGoTemplate(template: string): ChatWrapper | null {
  const family = goTemplateFamily(template);
  return family ? wrapperForFamily(family) : null;
}
