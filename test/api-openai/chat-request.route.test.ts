/**
 * Table-driven tests of the chat request schema and translator together, as the route runs them:
 * what OpenAI clients send → the native chat request, and every kind of bad input → a 400 in
 * OpenAI's format naming the offending `param`.
 */
import t from 'tap';
import { translateChatRequest, type ChatTranslation } from '../../plugins/api-openai/translate/chat-request.js';
import { ChatCompletionBody } from '../../plugins/api-openai/translate/schemas.js';
import { validated } from '../helpers/validated.js';

const chat = await validated(ChatCompletionBody, translateChatRequest);
const translate = async (body: unknown): Promise<ChatTranslation> => {
  const r = await chat(body);
  if (r.status !== 200) throw new Error(`${JSON.stringify(body)} was refused: ${JSON.stringify(r.error)}`);
  return r.value!;
};

const user = { role: 'user', content: 'hi' };

t.test('translates what clients send', async (t) => {
  const cases: { name: string; body: Record<string, unknown>; expect: Record<string, unknown> }[] = [
    {
      name: 'minimal',
      body: { model: 'm', messages: [user] },
      expect: { native: { model: 'm', messages: [{ role: 'user', content: 'hi' }], options: {} }, stream: false, includeUsage: false },
    },
    {
      name: 'developer becomes system, leading system messages merge, later ones stay',
      body: {
        model: 'm',
        messages: [{ role: 'developer', content: 'a' }, { role: 'system', content: [{ type: 'text', text: 'b' }] }, user, { role: 'system', content: 'c' }],
      },
      expect: {
        native: {
          messages: [
            { role: 'system', content: 'a\n\nb' },
            { role: 'user', content: 'hi' },
            { role: 'system', content: 'c' },
          ],
        },
      },
    },
    {
      name: 'content parts are flattened',
      body: {
        model: 'm',
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'x' },
              { type: 'text', text: 'y' },
            ],
          },
        ],
      },
      expect: { native: { messages: [{ role: 'user', content: 'x\ny' }] } },
    },
    {
      name: 'assistant tool calls with null content, tool results named by id',
      body: {
        model: 'm',
        messages: [
          user,
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '20C' },
          { role: 'assistant' },
        ],
      },
      expect: {
        native: {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
            { role: 'tool', content: '20C', tool_name: 'get_weather' },
            { role: 'assistant', content: '' },
          ],
        },
      },
    },
    {
      name: 'sampling options, max_completion_tokens wins over max_tokens, stop string',
      body: {
        model: 'm',
        messages: [user],
        max_tokens: 5,
        max_completion_tokens: 7,
        temperature: 0.2,
        top_p: 0.9,
        seed: 42,
        presence_penalty: 0.5,
        frequency_penalty: -0.5,
        stop: 'END',
        user: 'u1',
        num_ctx: 8192,
      },
      expect: {
        native: {
          options: { num_predict: 7, temperature: 0.2, top_p: 0.9, seed: 42, presence_penalty: 0.5, frequency_penalty: -0.5, stop: ['END'], num_ctx: 8192 },
        },
      },
    },
    {
      name: 'max_tokens alone, stop array, nulls are unset',
      body: { model: 'm', messages: [user], max_tokens: 3, stop: ['a', 'b'], temperature: null, n: 1, seed: null },
      expect: { native: { options: { num_predict: 3, stop: ['a', 'b'] } } },
    },
    {
      name: 'unknown fields are ignored',
      body: { model: 'm', messages: [user], store: true, metadata: { a: 1 }, service_tier: 'auto', reasoning_effort: 'low', future_field: [1] },
      expect: { native: { model: 'm', options: {} } },
    },
    {
      name: 'stream with usage',
      body: { model: 'm', messages: [user], stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } },
      expect: { stream: true, includeUsage: true },
    },
    {
      name: 'include_usage without stream is ignored',
      body: { model: 'm', messages: [user], stream_options: { include_usage: true } },
      expect: { stream: false, includeUsage: false },
    },
    {
      name: 'json_object',
      body: { model: 'm', messages: [user], response_format: { type: 'json_object' } },
      expect: { native: { format: 'json' } },
    },
    {
      name: 'json_schema',
      body: {
        model: 'm',
        messages: [user],
        response_format: { type: 'json_schema', json_schema: { name: 'x', strict: true, schema: { type: 'object', properties: { a: { type: 'string' } } } } },
      },
      expect: { native: { format: { type: 'object', properties: { a: { type: 'string' } } } } },
    },
    {
      name: 'custom tools left out; allowed_tools narrows and forces',
      body: {
        model: 'm',
        messages: [user, { role: 'user', content: [{ type: 'text', text: 'b' }, { type: 'hologram' }] }],
        tools: [
          { type: 'custom', custom: { name: 'x' } },
          { type: 'function', function: { name: 'f' } },
          { type: 'function', function: { name: 'g' } },
        ],
        tool_choice: { type: 'allowed_tools', allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'g' } }] } },
        prompt_cache_key: 'k',
        safety_identifier: 's',
        verbosity: 'low',
        web_search_options: {},
      },
      expect: {
        native: {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'user', content: 'b' },
          ],
          tools: [{ function: { name: 'g' } }],
          toolChoice: 'required',
        },
        ignored: ['web_search_options', "tools[0] (type 'custom')"],
      },
    },
    {
      name: 'tools with auto',
      body: {
        model: 'm',
        messages: [user],
        tool_choice: 'auto',
        parallel_tool_calls: false,
        tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' }, strict: true } }],
      },
      expect: { native: { tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }] } },
    },
    {
      name: 'named tool_choice keeps that tool only',
      body: {
        model: 'm',
        messages: [user],
        tools: [
          { type: 'function', function: { name: 'f' } },
          { type: 'function', function: { name: 'g' } },
        ],
        tool_choice: { type: 'function', function: { name: 'g' } },
      },
      expect: { native: { tools: [{ type: 'function', function: { name: 'g' } }], toolChoice: { name: 'g' } } },
    },
    {
      name: 'required keeps every tool and forces a call',
      body: {
        model: 'm',
        messages: [user],
        tools: [
          { type: 'function', function: { name: 'f' } },
          { type: 'function', function: { name: 'g' } },
        ],
        tool_choice: 'required',
      },
      expect: {
        native: {
          tools: [
            { type: 'function', function: { name: 'f' } },
            { type: 'function', function: { name: 'g' } },
          ],
          toolChoice: 'required',
        },
      },
    },
  ];
  for (const c of cases) t.match(await translate(c.body), c.expect, c.name);

  const tools = [{ type: 'function', function: { name: 'f' } }];
  const none = await translate({ model: 'm', messages: [user], tools, tool_choice: 'none' });
  t.equal(none.native.tools, undefined, 'tool_choice none drops the tools');
  t.equal(none.native.toolChoice, undefined, 'and forces nothing');
  for (const choice of ['auto', null, undefined]) {
    const auto = await translate({ model: 'm', messages: [user], tools, tool_choice: choice });
    t.equal(auto.native.tools?.length, 1, `tool_choice ${String(choice)} keeps the tools`);
    t.notOk('toolChoice' in auto.native, `tool_choice ${String(choice)} leaves toolChoice unset (auto)`);
  }
  const noTools = await translate({ model: 'm', messages: [user], tool_choice: 'none' });
  t.notOk('tools' in noTools.native || 'toolChoice' in noTools.native, 'none without tools is fine');
  const text = await translate({ model: 'm', messages: [user], response_format: { type: 'text' } });
  t.equal(text.native.format, undefined, 'response_format text sets no format');
});

t.test('rejects bad input with a 400 naming the param', async (t) => {
  const tools = [{ type: 'function', function: { name: 'f' } }];
  const cases: { body: unknown; param: string | null }[] = [
    { body: null, param: null },
    { body: [], param: null },
    { body: { messages: [user] }, param: 'model' },
    { body: { model: 7, messages: [user] }, param: 'model' },
    { body: { model: 'm' }, param: 'messages' },
    { body: { model: 'm', messages: [] }, param: 'messages' },
    { body: { model: 'm', messages: 'hi' }, param: 'messages' },
    { body: { model: 'm', messages: [{ role: 'robot', content: 'x' }] }, param: 'messages[0].role' },
    { body: { model: 'm', messages: [{ role: 'user' }] }, param: 'messages[0].content' },
    { body: { model: 'm', messages: [{ role: 'user', content: 5 }] }, param: 'messages[0].content' },
    {
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] },
      param: 'messages[0].content[0].image_url.url',
    },
    {
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { format: 'wav' } }] }] },
      param: 'messages[0].content[0].input_audio.data',
    },
    {
      body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'file', file: { file_data: 'x' } }] }] },
      param: 'messages[0].content[0].type',
    },
    {
      body: { model: 'm', messages: [{ role: 'system', content: [{ type: 'input_audio', input_audio: { data: 'UklGRg==', format: 'wav' } }] }] },
      param: 'messages[0].content',
    },
    { body: { model: 'm', messages: [{ role: 'user', content: [{ type: 'text' }] }] }, param: 'messages[0].content[0].text' },
    {
      body: { model: 'm', messages: [{ role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: '{bad' } }] }] },
      param: 'messages[0].tool_calls[0].function.arguments',
    },
    { body: { model: 'm', messages: [user], n: 2 }, param: 'n' },
    { body: { model: 'm', messages: [user], temperature: 3 }, param: 'temperature' },
    { body: { model: 'm', messages: [user], temperature: 'hot' }, param: 'temperature' },
    { body: { model: 'm', messages: [user], top_p: -1 }, param: 'top_p' },
    { body: { model: 'm', messages: [user], max_tokens: 0 }, param: 'max_tokens' },
    { body: { model: 'm', messages: [user], max_completion_tokens: 1.5 }, param: 'max_completion_tokens' },
    { body: { model: 'm', messages: [user], seed: 'x' }, param: 'seed' },
    { body: { model: 'm', messages: [user], num_ctx: 0 }, param: 'num_ctx' },
    { body: { model: 'm', messages: [user], stop: 5 }, param: 'stop' },
    { body: { model: 'm', messages: [user], stop: ['a', 1] }, param: 'stop[1]' },
    { body: { model: 'm', messages: [user], stream: 'yes' }, param: 'stream' },
    { body: { model: 'm', messages: [user], stream: true, stream_options: { include_usage: 1 } }, param: 'stream_options.include_usage' },
    { body: { model: 'm', messages: [user], logprobs: 'yes' }, param: 'logprobs' },
    { body: { model: 'm', messages: [user], logprobs: true, top_logprobs: 21 }, param: 'top_logprobs' },
    { body: { model: 'm', messages: [user], top_logprobs: 2 }, param: 'top_logprobs' },
    { body: { model: 'm', messages: [user], response_format: { type: 'yaml' } }, param: 'response_format.type' },
    { body: { model: 'm', messages: [user], response_format: { type: 'json_schema' } }, param: 'response_format.json_schema' },
    { body: { model: 'm', messages: [user], tools: {} }, param: 'tools' },
    { body: { model: 'm', messages: [user], tools: [{ type: 7 }] }, param: 'tools[0].type' },
    { body: { model: 'm', messages: [user], tools: [{ type: 'function', function: {} }] }, param: 'tools[0].function.name' },
    { body: { model: 'm', messages: [user], tool_choice: 'sometimes' }, param: 'tool_choice' },
    { body: { model: 'm', messages: [user], tools, tool_choice: 'sometimes' }, param: 'tool_choice' },
    { body: { model: 'm', messages: [user], tools, tool_choice: ['required'] }, param: 'tool_choice' },
    { body: { model: 'm', messages: [user], tools, tool_choice: { type: 'custom', function: { name: 'f' } } }, param: 'tool_choice.type' },
    { body: { model: 'm', messages: [user], tools, tool_choice: { type: 'function', function: {} } }, param: 'tool_choice.function.name' },
    // OpenAI: "'tool_choice' is only allowed when 'tools' are specified".
    { body: { model: 'm', messages: [user], tool_choice: 'required' }, param: 'tool_choice' },
    { body: { model: 'm', messages: [user], tools: [], tool_choice: 'required' }, param: 'tool_choice' },
    { body: { model: 'm', messages: [user], tool_choice: { type: 'function', function: { name: 'f' } } }, param: 'tool_choice' },
    {
      body: {
        model: 'm',
        messages: [user],
        tools: [{ type: 'function', function: { name: 'f' } }],
        tool_choice: { type: 'function', function: { name: 'g' } },
      },
      param: 'tool_choice.function.name',
    },
  ];
  for (const c of cases) {
    const label = JSON.stringify(c.body);
    const r = await chat(c.body);
    t.equal(r.status, 400, `${label} → 400`);
    t.match(r.error, { error: { message: /\S/, type: 'invalid_request_error', code: null } }, `${label}: OpenAI's format`);
    t.equal((r.error as { error: { param: unknown } }).error.param, c.param, `${label} → param ${c.param}`);
  }
});
