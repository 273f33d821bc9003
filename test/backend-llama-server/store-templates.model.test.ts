/**
 * A GGUF without a chat template of its own (stories260K) whose store template layer names a
 * chat format is prompted in that format on llama-server (plugins/gguf/prompts/chat-families.ts), as on
 * node-llama-cpp: a conversation's prompt is exactly the format's text, which the same model
 * evaluates to as many tokens when it is sent raw.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from '../engine/helpers.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();

const FAMILIES = [
  {
    name: 'chatml',
    template: '{{ range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n',
    prompt: (s: string, u: string) => `<|im_start|>system\n${s}<|im_end|>\n<|im_start|>user\n${u}<|im_end|>\n<|im_start|>assistant\n`,
  },
  {
    name: 'llama3',
    template: '{{ range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n{{ .Content }}<|eot_id|>{{ end }}',
    prompt: (s: string, u: string) =>
      `<|start_header_id|>system<|end_header_id|>\n\n${s}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n${u}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`,
  },
  {
    name: 'llama2',
    template: '[INST] <<SYS>>{{ .System }}<</SYS>>\n\n{{ .Prompt }} [/INST]',
    prompt: (s: string, u: string) => `[INST] <<SYS>>\n${s}\n<</SYS>>\n\n${u} [/INST]`,
  },
  { name: 'mistral', template: '[INST] {{ .Prompt }} [/INST]', prompt: (s: string, u: string) => `[INST] ${s}\n\n${u} [/INST]` },
  {
    name: 'gemma',
    template: '<start_of_turn>user\n{{ .Prompt }}<end_of_turn>\n<start_of_turn>model\n',
    prompt: (s: string, u: string) => `<start_of_turn>user\n${s}\n\n${u}<end_of_turn>\n<start_of_turn>model\n`,
  },
];

const app = await startEngineAppliance({ env: { LIA_BACKENDS: 'gguf=llama-server', LIA_CONTEXT_LENGTH: '512' } });
t.teardown(() => app.close());
const ollama = ollamaClient(app);
const system = 'You tell short stories.';
const user = 'Tell me about a cat.';

for (const family of FAMILIES) {
  t.test(`a ${family.name} template layer: the conversation is prompted in that format`, async (t) => {
    await createModel(app, family.name, 'gguf/stories260K.gguf', { template: family.template });
    const options = { num_predict: 1, temperature: 0 };
    const chat = await ollama.chat({
      model: family.name,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      options,
    });
    const raw = await ollama.generate({ model: family.name, prompt: family.prompt(system, user), raw: true, options });
    t.equal(chat.prompt_eval_count, raw.prompt_eval_count, `${chat.prompt_eval_count} tokens, as the format's text`);
  });
}
