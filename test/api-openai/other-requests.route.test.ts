/**
 * Table-driven tests of the `/v1/completions` and `/v1/embeddings` request schemas and
 * translators together, as the routes run them.
 */
import t, { type Test } from 'tap';
import { translateCompletionRequest } from '../../plugins/api-openai/translate/completion.js';
import { translateEmbeddingsRequest } from '../../plugins/api-openai/translate/embeddings.js';
import { CompletionBody, EmbeddingsBody } from '../../plugins/api-openai/translate/schemas.js';
import { validated, type Validated } from '../helpers/validated.js';

const completion = await validated(CompletionBody, translateCompletionRequest);
const embeddings = await validated(EmbeddingsBody, translateEmbeddingsRequest);

async function value<R>(run: Promise<Validated<R>>): Promise<R> {
  const r = await run;
  if (r.status !== 200) throw new Error(`refused: ${JSON.stringify(r.error)}`);
  return r.value!;
}

async function rejects(t: Test, run: Promise<Validated<unknown>>, param: string | null, label: string): Promise<void> {
  const r = await run;
  t.equal(r.status, 400, `${label} → 400`);
  t.match(r.error, { error: { type: 'invalid_request_error' } }, `${label}: OpenAI's format`);
  t.equal((r.error as { error: { param: unknown } }).error.param, param, `${label} → param ${param}`);
}

t.test('completions', async (t) => {
  t.match(
    await value(completion({ model: 'm', prompt: 'Once' })),
    {
      natives: [{ model: 'm', prompt: 'Once', raw: true, options: { num_predict: 16 } }],
      prompts: ['Once'],
      echo: false,
      stream: false,
      includeUsage: false,
    },
    'a string prompt is raw text, max_tokens defaults to 16',
  );
  const many = await value(
    completion({
      model: 'm',
      prompt: ['a', 'b'],
      max_tokens: 5,
      stop: ['.'],
      echo: true,
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0,
      seed: 1,
      logprobs: null,
      best_of: 1,
      n: 1,
    }),
  );
  t.match(
    many,
    {
      natives: [
        { prompt: 'a', options: { num_predict: 5, stop: ['.'], temperature: 0, seed: 1 } },
        { prompt: 'b', options: { num_predict: 5, stop: ['.'], temperature: 0, seed: 1 } },
      ],
      echo: true,
      stream: true,
      includeUsage: true,
    },
    'one native request per prompt',
  );
  t.not(many.natives[0]!.options, many.natives[1]!.options, 'options are not shared objects');
  t.match(
    await value(completion({ model: 'm', prompt: 'def f(', suffix: '\n  return x' })),
    {
      natives: [{ prompt: 'def f(', suffix: '\n  return x', raw: false }],
    },
    'suffix makes a fill-in-the-middle request through the template',
  );

  const bad: [unknown, string | null][] = [
    [{ prompt: 'x' }, 'model'],
    [{ model: 'm' }, 'prompt'],
    [{ model: 'm', prompt: [] }, 'prompt'],
    [{ model: 'm', prompt: [1, 2, 3] }, 'prompt'],
    [{ model: 'm', prompt: [[1, 2]] }, 'prompt'],
    [{ model: 'm', prompt: ['a', {}] }, 'prompt[1]'],
    [{ model: 'm', prompt: 'x', n: 3 }, 'n'],
    [{ model: 'm', prompt: 'x', best_of: 2 }, 'best_of'],
    [{ model: 'm', prompt: 'x', logprobs: 6 }, 'logprobs'],
    [{ model: 'm', prompt: 'x', logprobs: 1, echo: true }, 'echo'],
    [{ model: 'm', prompt: 'x', max_tokens: -1 }, 'max_tokens'],
    [{ model: 'm', prompt: 'x', suffix: 3 }, 'suffix'],
    [{ model: 'm', prompt: 'x', echo: 'yes' }, 'echo'],
  ];
  for (const [body, param] of bad) await rejects(t, completion(body), param, JSON.stringify(body));
});

t.test('embeddings', async (t) => {
  t.same(await value(embeddings({ model: 'm', input: 'hello' })), { native: { model: 'm', input: ['hello'] }, encoding: 'float' });
  t.same(await value(embeddings({ model: 'm', input: ['a', 'b'], encoding_format: 'base64', dimensions: 16, user: 'x' })), {
    native: { model: 'm', input: ['a', 'b'], dimensions: 16 },
    encoding: 'base64',
  });
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
  for (const [body, param] of bad) await rejects(t, embeddings(body), param, JSON.stringify(body).slice(0, 60));
});
