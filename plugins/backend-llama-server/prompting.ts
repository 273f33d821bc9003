/**
 * How a generation server prompts a model that carries no chat template in its weights: with the
 * chat format its store template names, or, with no store template either, with generate's
 * prompt passed through as it is. Decided once at load: the chat template goes on the server's
 * command line (backend.ts), the pass-through to generate (served-model.ts, generate.ts).
 *
 * @module
 */
import type { ResolvedModel } from 'lia/model-store';
import { familyJinjaTemplate, goTemplateFamily } from 'lia/gguf';

/**
 * How a model without a chat template of its own is prompted, as node-llama-cpp prompts it: in
 * the chat format its store template names (`chatTemplate`), or, with no store template at all,
 * with generate's prompt passed through as it is (`untemplated`: Ollama's default template is
 * `{{ .Prompt }}`) and chat in llama.cpp's ChatML.
 */
export interface Prompting {
  chatTemplate?: string;
  untemplated: boolean;
}

/** The {@link Prompting} of `model`, whose weights carry `own` (null: no chat template; undefined: not known, taken as one). */
export function promptingOf(model: ResolvedModel, own: string | null | undefined): Prompting {
  if (own !== null) return { untemplated: false };
  const store = model.template?.trim() ? model.template : undefined;
  if (!store) return { untemplated: true };
  const family = goTemplateFamily(store);
  return family ? { chatTemplate: familyJinjaTemplate(family), untemplated: false } : { untemplated: false };
}
