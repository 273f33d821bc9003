/**
 * Request validation by route schema, as each surface shows it: a wrong type is a 400 naming the
 * field in the surface's error format (Ollama's `{"error":"..."}` under /api, OpenAI's
 * `{"error":{message,type,param,code}}` under /v1), a number sent as a string is refused rather
 * than converted, and unknown fields reach the handler untouched. The real route schemas and the
 * real error handler, without a server (`inject()`).
 */
import t from 'tap';
import { ChatCompletionBody, EmbeddingsBody } from '../../plugins/api-openai/translate/schemas.js';
import { ChatBody, EmbedBody, GenerateBody } from '../../plugins/engine/routes/schemas.js';
import { validated } from '../helpers/validated.js';

const same = <B>(body: B): B => body;

t.test('Ollama surface: {"error":"..."} naming the field', async (t) => {
  const generate = await validated(GenerateBody, same, '/api/generate');
  const cases: [unknown, string][] = [
    [{ model: 'm', prompt: 42 }, '"prompt" must be a string'],
    [{ model: 'm', prompt: 'x', stream: 'false' }, '"stream" must be a boolean'],
    [{ model: 'm', prompt: 'x', options: [] }, '"options" must be an object'],
    [{ prompt: 'x' }, 'model is required'],
    [{ model: '', prompt: 'x' }, 'model is required'],
    [{ model: 'm', keep_alive: true }, 'invalid keep_alive: expected a number of seconds or a duration such as "5m"'],
    [{ model: 'm', format: 'yaml' }, 'invalid format: expected "json" or a valid JSON Schema object'],
    [null, 'missing request body'],
    [['m'], 'the request body must be a JSON object'],
  ];
  for (const [body, error] of cases) t.same(await generate(body), { status: 400, error: { error } }, JSON.stringify(body));

  const chat = await validated(ChatBody, same, '/api/chat');
  t.same(
    await chat({ model: 'm', messages: [{ role: 'user', content: 5 }] }),
    {
      status: 400,
      error: { error: '"messages[0].content" must be a string' },
    },
    'a nested field is named by its path',
  );
  t.same(await chat({ model: 'm', tools: [{ function: {} }] }), { status: 400, error: { error: 'tools[0].function.name is required' } });

  const embed = await validated(EmbedBody, same, '/api/embed');
  t.same(
    await embed({ model: 'm', input: 'x', dimensions: '4' }),
    { status: 400, error: { error: '"dimensions" must be an integer' } },
    'a string number is not coerced',
  );
  t.same(await embed({ model: 'm', input: 'x', truncate: 'true' }), { status: 400, error: { error: '"truncate" must be a boolean' } }, 'nor a string boolean');
  t.same(await embed({ model: 'm', input: ['a', 3] }), { status: 400, error: { error: 'invalid input type' } }, "Ollama's own text");

  const accepted = await generate({ model: 'm', prompt: 'x', stream: null, future_field: { a: [1] }, context: [1, 2] });
  t.same(
    accepted,
    { status: 200, value: { model: 'm', prompt: 'x', stream: null, future_field: { a: [1] }, context: [1, 2] } },
    'unknown fields and nulls pass untouched',
  );
});

t.test('OpenAI surface: {"error":{message,type,param,code}} with param the field path', async (t) => {
  const chat = await validated(ChatCompletionBody, same, '/v1/chat/completions');
  const user = { role: 'user', content: 'hi' };
  const cases: [unknown, string, string | null][] = [
    [{ model: 'm', messages: [user], temperature: '0.5' }, '"temperature" must be a number', 'temperature'],
    [{ model: 'm', messages: [user], max_tokens: '5' }, '"max_tokens" must be an integer', 'max_tokens'],
    [{ model: 'm', messages: [user], temperature: 3 }, '"temperature" must be at most 2', 'temperature'],
    [
      { model: 'm', messages: [{ role: 'robot', content: 'x' }] },
      '"messages[0].role" must be one of system, developer, user, assistant, tool, function',
      'messages[0].role',
    ],
    [{ model: 'm', messages: [user], stop: ['a', 1] }, '"stop[1]" must be a string', 'stop[1]'],
    [{ model: 'm', messages: [user], stop: 5 }, '"stop" must be a string or an array', 'stop'],
    [{ messages: [user] }, 'model is required', 'model'],
    [{ model: 'm', messages: [] }, '"messages" must not be empty', 'messages'],
    [null, 'missing request body', null],
  ];
  for (const [body, message, param] of cases) {
    t.same(await chat(body), { status: 400, error: { error: { message, type: 'invalid_request_error', param, code: null } } }, JSON.stringify(body));
  }
  const embeddings = await validated(EmbeddingsBody, same, '/v1/embeddings');
  t.same(
    await embeddings({ model: 'm', input: 'x', dimensions: '8' }),
    {
      status: 400,
      error: { error: { message: '"dimensions" must be an integer', type: 'invalid_request_error', param: 'dimensions', code: null } },
    },
    'a string number is not coerced',
  );

  const body = { model: 'm', messages: [{ ...user, name: 'bob', extra: 1 }], store: true, metadata: { k: 'v' }, temperature: null, future: [1] };
  t.same(await chat(body), { status: 200, value: body }, 'unknown fields (top level and nested) and nulls pass untouched');
});
