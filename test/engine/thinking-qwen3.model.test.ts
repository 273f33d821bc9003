/**
 * Thinking on a real model family's GGUF: synthetic-qwen3-tiny (Qwen3's tokenizer and Jinja chat
 * template, random weights). The template's `<think>` section and `enable_thinking` give the
 * `thinking` capability (and `tools`) in `/api/show`; `think` is accepted on `/api/chat` and
 * `/api/generate`; and the prompt the model evaluates follows the request: `think: false` (and
 * `reasoning_effort: "none"` on `/v1/chat/completions`) renders what Qwen3's template renders
 * with `enable_thinking=false`, an empty `<think>\n\n</think>\n\n` opening the answer, and
 * `think: true` what it renders by default. The model's text is random, so the check is the
 * prompt's length (`prompt_eval_count`, through the official `ollama` client): thinking off adds
 * exactly the empty thought's tokens. The split of a `<think>` section from the answer is checked with scripted
 * output in thinking.e2e.test.ts.
 */
import t from 'tap';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance({ plugins: { 'api-openai': {} } });
t.teardown(() => app.close());
await createModel(app, 'qwen3', 'gguf/synthetic-qwen3-tiny.gguf');
const ollama = ollamaClient(app);
const question = 'Why is the sky blue?';
const messages = [{ role: 'user', content: question }];
const options = { num_predict: 2, temperature: 0 };

/**
 * The tokens Qwen3's template adds for `enable_thinking=false`: an empty thought opening the
 * answer. `<think>` and `</think>` are ordinary (not special) tokens of Qwen3's vocabulary, so a
 * raw prompt counts them as the template renders them.
 */
const emptyThought = async (): Promise<number> => {
  const count = async (prompt: string) => (await ollama.generate({ model: 'qwen3', prompt, raw: true, options })).prompt_eval_count;
  return (await count('x<think>\n\n</think>\n\n')) - (await count('x'));
};

t.test('the Jinja template gives the thinking and tools capabilities', async (t) => {
  const show = await ollama.show({ model: 'qwen3' });
  t.same([...show.capabilities].sort(), ['completion', 'thinking', 'tools']);
});

t.test('/api/chat: think false switches thinking off in the prompt, true leaves it on', async (t) => {
  const empty = await emptyThought();
  t.equal(empty, 4, '<think>, \\n\\n, </think>, \\n\\n');

  const thinking = await ollama.chat({ model: 'qwen3', messages, think: true, options });
  t.equal(thinking.done, true, 'think: true is accepted');
  const on = thinking.prompt_eval_count;
  const quiet = await ollama.chat({ model: 'qwen3', messages, think: false, options });
  t.equal(quiet.prompt_eval_count, on + empty, 'think: false: the empty thought of enable_thinking=false');
  t.notOk('thinking' in quiet.message, 'no thinking when it is off');
  const unset = await ollama.chat({ model: 'qwen3', messages, options });
  t.equal(unset.prompt_eval_count, on, "think unset: the template's default (thinking on)");
  const level = await ollama.chat({ model: 'qwen3', messages, think: 'low', options });
  t.equal(level.prompt_eval_count, on, 'a level is taken as true');
});

t.test('/api/generate follows think the same way', async (t) => {
  const on = (await ollama.chat({ model: 'qwen3', messages, think: true, options })).prompt_eval_count;
  t.equal((await ollama.generate({ model: 'qwen3', prompt: question, think: true, options })).prompt_eval_count, on, 'one user turn, as the chat');
  t.equal((await ollama.generate({ model: 'qwen3', prompt: question, think: false, options })).prompt_eval_count, on + (await emptyThought()));
});

t.test('with tools: accepted either way, thinking off in the prompt for think false', async (t) => {
  const tools = [
    {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    },
  ];
  const on = await ollama.chat({ model: 'qwen3', messages, tools, think: true, options });
  const off = await ollama.chat({ model: 'qwen3', messages, tools, think: false, options });
  t.equal(on.done, true);
  t.equal(off.prompt_eval_count - on.prompt_eval_count, await emptyThought(), 'the empty thought after the tools prompt');
});

t.test('/v1/chat/completions: reasoning_effort none switches thinking off', async (t) => {
  const ask = async (extra: object) => {
    const res = await app.fetch('/v1/chat/completions', {
      method: 'POST',
      body: JSON.stringify({ model: 'qwen3', messages, max_tokens: 2, temperature: 0, ...extra }),
    });
    t.equal(res.status, 200);
    return ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
  };
  const on = (await ollama.chat({ model: 'qwen3', messages, think: true, options })).prompt_eval_count;
  t.equal(await ask({ reasoning_effort: 'none' }), on + (await emptyThought()));
  t.equal(await ask({ reasoning_effort: 'high' }), on);
});
