/**
 * A GGUF whose Jinja chat template matches none of node-llama-cpp's specialised wrappers (a
 * Zephyr-style template, written into a copy of stories260K): the template is used as written,
 * and a second load of the same file, which skips the search for a specialised wrapper, formats
 * the prompt exactly as the first (same prompt tokens, same answer at temperature 0).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { fixture } from '../helpers/fixtures.js';
import { withStringMetadata } from '../helpers/gguf-edit.js';
import { uploadBlob } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

const TEMPLATE =
  "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}";

const dir = await mkdtemp(path.join(os.tmpdir(), 'lia-template-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
// The same template after a fixed preamble: the model whose prompt grows by it uses the GGUF's template.
const PREAMBLE = 'Once upon a time there was a little girl who lived in a small house near the woods. ';
async function modelFile(name: string, template: string): Promise<string> {
  const file = path.join(dir, `${name}.gguf`);
  await withStringMetadata(fixture('gguf/stories260K.gguf'), file, 'tokenizer.chat_template', template);
  return file;
}

const app = await startEngineAppliance();
t.teardown(() => app.close());
for (const [name, template] of [
  ['zephyr', TEMPLATE],
  ['preamble', PREAMBLE + TEMPLATE],
] as const) {
  const digest = await uploadBlob(app, await modelFile(name, template));
  const created = await app.fetch('/api/create', { method: 'POST', body: JSON.stringify({ model: name, files: { [`${name}.gguf`]: digest }, stream: false }) });
  if (created.status !== 200) throw new Error(`creating ${name} failed: ${created.status} ${await created.text()}`);
}
const ollama = ollamaClient(app);
const messages = [{ role: 'user', content: 'Tell me a story about a cat.' }];
const options = { num_predict: 8, temperature: 0, seed: 7 };

t.test('the template is rendered as written, and the same after a reload', async (t) => {
  const first = await ollama.chat({ model: 'zephyr', messages, options });
  const longer = await ollama.chat({ model: 'preamble', messages, options, keep_alive: 0 });
  t.ok(
    longer.prompt_eval_count >= first.prompt_eval_count + 10,
    `the GGUF's template makes the prompt (${first.prompt_eval_count} tokens, ${longer.prompt_eval_count} with the preamble)`,
  );

  await ollama.generate({ model: 'zephyr', prompt: '', keep_alive: 0 });
  t.same((await ollama.ps()).models, [], 'unloaded');
  const again = await ollama.chat({ model: 'zephyr', messages, options });
  t.equal(again.prompt_eval_count, first.prompt_eval_count, 'the reloaded model formats the prompt the same');
  t.equal(again.message.content, first.message.content, 'and gives the same answer');
});
