/**
 * `lia/gguf`: the public module of the `gguf` plugin, for the engines that run GGUF models. It
 * holds what every llama.cpp engine must do alike, so a client reads the same prompt, the same
 * errors and vectors of the same shape whichever engine runs its model: the chat format a store
 * template names, Ollama's simple Go templates, the 400 of a prompt past the context, the shape of
 * an embedding, which slot a request takes and whose cached prompt it copies, and the memory a
 * model takes before it is loaded. The format handler itself is the
 * plugin's hook (`hooks.extensions.get('gguf')`), which an engine declares in `requires`.
 *
 * Nothing here imports a library or the appliance: an engine's own process (backend-llama-cpp's
 * runner) loads it alone. It follows no API version, as `lia/utils`.
 *
 * @module
 */
import type { FormatHandler } from 'lia/engine';

export { promptTooLong } from './prompts/context-length.js';
export { renderGoTemplate } from './prompts/go-template.js';
export { familyJinjaTemplate, goTemplateFamily, type TemplateFamily } from './prompts/chat-families.js';
export { shapeEmbedding } from './prompts/embedding-shape.js';
export {
  chooseDonor,
  chooseSlot,
  takesTurn,
  worthCopying,
  CHARS_PER_TOKEN,
  MIN_SHARED_TOKENS,
  SERIAL_PROMPT_TOKENS,
  type Donor,
  type PromptFacts,
  type SlotChoice,
  type SlotFacts,
} from './slots/slot-choice.js';
export { estimateBytes, fileBytes, readShape, type GgufShape } from './estimate.js';

/** What the `gguf` plugin offers the engines (`hooks.extensions.get('gguf')`). */
export interface GgufHook {
  /**
   * The `gguf` format handler: recognising and describing stored models, their chat template and
   * the memory they take. One instance for every engine, so header summaries are read once.
   */
  readonly format: FormatHandler;
}

declare module 'lia/plugin' {
  interface CustomHooks {
    gguf: GgufHook;
  }
}
