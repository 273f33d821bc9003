/**
 * Table-driven tests of the `/v1/completions` and `/v1/embeddings` request translators.
 */
import t, { type Test } from 'tap';
import { isAppError } from '../../core/index.js';
import { translateCompletionRequest } from '../../plugins/api-openai/translate/completion.js';
import { translateEmbeddingsRequest } from '../../plugins/api-openai/translate/embeddings.js';

function rejects(t: Test, fn: () => unknown, param: string | null, label: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  t.ok(isAppError(caught) && caught.statusCode === 400 && caught.param === param, `${label} → 400 param ${param}`);
}

t.test('completions', async (t) => {
  t.match(translateCompletionRequest({ model: 'm', prompt: 'Once' }), {
    natives: [{ model: 'm', prompt: 'Once', raw: true, options: { num_predict: 16 } }],
    prompts: ['Once'],
    echo: false,
    stream: false,
    includeUsage: false,
  }, 'a string prompt is raw text, max_tokens defaults to 16');
  const many = translateCompletionRequest({
    model: 'm', prompt: ['a', 'b'], max_tokens: 5, stop: ['.'], echo: true, stream: true, stream_options: { include_usage: true },
    temperature: 0, seed: 1, logprobs: null, best_of: 1, n: 1,
  });
  t.match(many, {
    natives: [
      { prompt: 'a', options: { num_predict: 5, stop: ['.'], temperature: 0, seed: 1 } },
      { prompt: 'b', options: { num_predict: 5, stop: ['.'], temperature: 0, seed: 1 } },
    ],
    echo: true,
    stream: true,
    includeUsage: true,
  }, 'one native request per prompt');
  t.not(many.natives[0]!.options, many.natives[1]!.options, 'options are not shared objects');
  t.match(translateCompletionRequest({ model: 'm', prompt: 'def f(', suffix: '\n  return x' }), {
    natives: [{ prompt: 'def f(', suffix: '\n  return x', raw: false }],
  }, 'suffix makes a fill-in-the-middle request through the template');

  const bad: [unknown, string | null][] = [
    [{ prompt: 'x' }, 'model'],
    [{ model: 'm' }, 'prompt'],
    [{ model: 'm', prompt: [] }, 'prompt'],
    [{ model: 'm', prompt: [1, 2, 3] }, 'prompt'],
    [{ model: 'm', prompt: [[1, 2]] }, 'prompt'],
    [{ model: 'm', prompt: ['a', {}] }, 'prompt[1]'],
    [{ model: 'm', prompt: 'x', n: 3 }, 'n'],
    [{ model: 'm', prompt: 'x', best_of: 2 }, 'best_of'],
    [{ model: 'm', prompt: 'x', logprobs: 2 }, 'logprobs'],
    [{ model: 'm', prompt: 'x', max_tokens: -1 }, 'max_tokens'],
    [{ model: 'm', prompt: 'x', suffix: 3 }, 'suffix'],
    [{ model: 'm', prompt: 'x', echo: 'yes' }, 'echo'],
  ];
  for (const [body, param] of bad) rejects(t, () => translateCompletionRequest(body), param, JSON.stringify(body));
});

t.test('embeddings', async (t) => {
  t.same(translateEmbeddingsRequest({ model: 'm', input: 'hello' }), { native: { model: 'm', input: ['hello'] }, encoding: 'float' });
  t.same(
    translateEmbeddingsRequest({ model: 'm', input: ['a', 'b'], encoding_format: 'base64', dimensions: 16, user: 'x' }),
    { native: { model: 'm', input: ['a', 'b'], dimensions: 16 }, encoding: 'base64' },
  );
  const bad: [unknown, string | null][] = [
    [{ input: 'x' }, 'model'],
    [{ model: 'm' }, 'input'],
    [{ model: 'm', input: '' }, 'input'],
    [{ model: 'm', input: [] }, 'input'],
    [{ model: 'm', input: ['a', ''] }, 'input[1]'],
    [{ model: 'm', input: [1, 2] }, 'input'],
    [{ model: 'm', input: [[1, 2]] }, 'input'],
    [{ model: 'm', input: [null] }, 'input[0]'],
    [{ model: 'm', input: 'x', encoding_format: 'int8' }, 'encoding_format'],
    [{ model: 'm', input: 'x', dimensions: 0 }, 'dimensions'],
    [{ model: 'm', input: Array(2049).fill('a') }, 'input'],
  ];
  for (const [body, param] of bad) rejects(t, () => translateEmbeddingsRequest(body), param, JSON.stringify(body).slice(0, 60));
});
