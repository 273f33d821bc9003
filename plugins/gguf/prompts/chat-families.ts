/**
 * The common chat formats an Ollama Go template can name (ChatML, Llama 3, Llama 2, Mistral,
 * Gemma), recognised by their markers, and each as a Jinja chat template in the shape llama.cpp's
 * `--jinja` renders: what a GGUF without a chat template of its own is prompted with when its
 * store template layer names one of them, on whichever local engine runs it. node-llama-cpp maps
 * a family to its built-in chat wrapper; llama-server is started with the family's Jinja text.
 *
 * @module
 */

/** A chat format recognised in a Go template. */
export type TemplateFamily = 'chatml' | 'llama3' | 'llama2' | 'mistral' | 'gemma';

/** The family of an Ollama Go template, by its markers; null when none is recognised. */
export function goTemplateFamily(template: string): TemplateFamily | null {
  if (template.includes('<|im_start|>')) return 'chatml';
  if (template.includes('<|start_header_id|>')) return 'llama3';
  if (template.includes('<start_of_turn>')) return 'gemma';
  if (template.includes('[INST]')) return template.includes('<<SYS>>') ? 'llama2' : 'mistral';
  return null;
}

/** The literal text around each part of a conversation, for the formats without a system turn. */
interface Turns {
  /** Around a system prompt, which goes at the head of the next user turn. */
  system: [string, string];
  user: [string, string];
  assistant: [string, string];
}

/**
 * A Jinja template for a format without a system turn: system messages are held in `sys.text`
 * and put at the head of the next user turn; tool results are user turns. Strings are Jinja
 * literals (`\n` in one is a newline).
 */
function folded({ system, user, assistant }: Turns): string {
  return (
    `{%- set sys = namespace(text='') -%}{%- for m in messages -%}` +
    `{%- if m['role'] == 'system' -%}{%- set sys.text = sys.text + '${system[0]}' + m['content'] | trim + '${system[1]}' -%}` +
    `{%- elif m['role'] == 'assistant' -%}{{ '${assistant[0]}' + m['content'] | trim + '${assistant[1]}' }}` +
    `{%- else -%}{{ '${user[0]}' + sys.text + m['content'] | trim + '${user[1]}' }}{%- set sys.text = '' -%}` +
    `{%- endif -%}{%- endfor -%}`
  );
}

const JINJA: Record<TemplateFamily, string> = {
  chatml:
    `{%- for m in messages -%}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{%- endfor -%}` +
    `{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}`,
  llama3:
    `{%- for m in messages -%}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + m['content'] | trim + '<|eot_id|>' }}{%- endfor -%}` +
    `{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif -%}`,
  // `[INST] … [/INST] answer </s><s>[INST] …`, the system prompt in `<<SYS>>` inside the first turn.
  llama2: folded({ system: ['<<SYS>>\\n', '\\n<</SYS>>\\n\\n'], user: ['[INST] ', ' [/INST]'], assistant: [' ', ' </s><s>'] }),
  mistral: folded({ system: ['', '\\n\\n'], user: ['[INST] ', ' [/INST]'], assistant: ['', '</s>'] }),
  gemma:
    folded({ system: ['', '\\n\\n'], user: ['<start_of_turn>user\\n', '<end_of_turn>\\n'], assistant: ['<start_of_turn>model\\n', '<end_of_turn>\\n'] }) +
    `{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}`,
};

/** The family's chat format as a Jinja template for llama.cpp (`llama-server --jinja --chat-template`). */
export function familyJinjaTemplate(family: TemplateFamily): string {
  return JINJA[family];
}
