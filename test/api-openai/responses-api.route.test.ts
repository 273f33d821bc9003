/**
 * Table-driven tests of the Responses API translators (`POST /v1/responses`): the route schema
 * and request translator together (what clients send → the native chat request and the echo, and
 * each kind of bad input → a 400 in OpenAI's format naming the `param`), and native events → the
 * stream events and the `response` object, every one validated against the official schemas.
 */
import t from 'tap';
import { Errors } from '../../core/index.js';
import type { GenerationEvent } from 'lia/engine';
import { ResponseEmitter, type ItemIds } from '../../plugins/api-openai/translate/responses-events.js';
import { translateResponseRequest, type ResponseTranslation } from '../../plugins/api-openai/translate/responses-request.js';
import { ResponseBody } from '../../plugins/api-openai/translate/responses-schema.js';
import { validateOpenAI, validateStreamEvent } from '../helpers/openai-schema.js';
import { validated } from '../helpers/validated.js';

const route = await validated(ResponseBody, translateResponseRequest, '/v1/responses');
const translate = async (body: unknown): Promise<ResponseTranslation> => {
  const r = await route(body);
  if (r.status !== 200) throw new Error(`${JSON.stringify(body)} was refused: ${JSON.stringify(r.error)}`);
  return r.value!;
};

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
};

t.test('translates what clients send', async (t) => {
  const cases: { name: string; body: Record<string, unknown>; expect: Record<string, unknown> }[] = [
    {
      name: 'a string input is one user message; defaults echoed',
      body: { model: 'm', input: 'hi' },
      expect: {
        native: { model: 'm', messages: [{ role: 'user', content: 'hi' }], options: {} },
        stream: false,
        echo: {
          instructions: null,
          max_output_tokens: null,
          temperature: null,
          top_p: null,
          tools: [],
          tool_choice: 'auto',
          text: { format: { type: 'text' }, verbosity: 'medium' },
          parallel_tool_calls: true,
          metadata: {},
        },
      },
    },
    {
      name: 'instructions and leading system/developer items merge into one system message',
      body: {
        model: 'm',
        instructions: 'Be brief.',
        input: [
          { role: 'developer', content: 'Use French.' },
          {
            type: 'message',
            role: 'user',
            content: [
              { type: 'input_text', text: 'a' },
              { type: 'input_text', text: 'b' },
            ],
          },
          { role: 'assistant', content: [{ type: 'output_text', text: 'c', annotations: [] }] },
          { role: 'system', content: 'late' },
        ],
      },
      expect: {
        native: {
          messages: [
            { role: 'system', content: 'Be brief.\n\nUse French.' },
            { role: 'user', content: 'a\nb' },
            { role: 'assistant', content: 'c' },
            { role: 'system', content: 'late' },
          ],
        },
        echo: { instructions: 'Be brief.' },
      },
    },
    {
      name: 'a tool round trip: function_call joins the assistant message, its output is named',
      body: {
        model: 'm',
        input: [
          { role: 'user', content: 'weather?' },
          { type: 'message', role: 'assistant', content: 'Let me look.' },
          { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' },
          { type: 'function_call_output', call_id: 'call_1', output: 'Sunny' },
          { type: 'reasoning', id: 'rs_1', summary: [] },
          { type: 'function_call', call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Rome"}' },
          { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'Rain' }] },
        ],
      },
      expect: {
        native: {
          messages: [
            { role: 'user', content: 'weather?' },
            { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'call_1', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
            { role: 'tool', content: 'Sunny', tool_name: 'get_weather' },
            { role: 'assistant', content: '', tool_calls: [{ id: 'call_2', function: { name: 'get_weather', arguments: { city: 'Rome' } } }] },
            { role: 'tool', content: 'Rain', tool_name: 'get_weather' },
          ],
        },
      },
    },
    {
      name: 'sampling, max_output_tokens, stream; echoed fields',
      body: {
        model: 'm',
        input: 'x',
        max_output_tokens: 5,
        temperature: 0.2,
        top_p: 0.9,
        stream: true,
        store: true,
        metadata: { k: 'v' },
        user: 'u1',
        parallel_tool_calls: false,
        previous_response_id: null,
        include: [],
        reasoning: { effort: 'low' },
      },
      expect: {
        native: { options: { num_predict: 5, temperature: 0.2, top_p: 0.9 } },
        stream: true,
        echo: { max_output_tokens: 5, temperature: 0.2, top_p: 0.9, metadata: { k: 'v' }, user: 'u1', parallel_tool_calls: false },
      },
    },
    {
      name: 'flat function tools, auto',
      body: { model: 'm', input: 'x', tools: [weather], tool_choice: 'auto' },
      expect: {
        native: { tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: weather.parameters } }] },
        echo: { tools: [{ ...weather, strict: null }], tool_choice: 'auto' },
      },
    },
    {
      name: 'a named function is forced',
      body: { model: 'm', input: 'x', tools: [weather, { type: 'function', name: 'other' }], tool_choice: { type: 'function', name: 'get_weather' } },
      expect: {
        native: { tools: [{ function: { name: 'get_weather' } }], toolChoice: { name: 'get_weather' } },
        echo: { tool_choice: { type: 'function', name: 'get_weather' } },
      },
    },
    { name: 'required', body: { model: 'm', input: 'x', tools: [weather], tool_choice: 'required' }, expect: { native: { toolChoice: 'required' } } },
    {
      name: 'a namespace is flattened; hosted tools are left out and echoed',
      body: {
        model: 'm',
        input: 'x',
        tools: [
          weather,
          { type: 'web_search', external_web_access: false },
          {
            type: 'namespace',
            name: 'mcp__docs__',
            description: 'Docs',
            tools: [
              { type: 'function', name: 'search', parameters: { type: 'object' } },
              { type: 'custom', name: 'raw' },
            ],
          },
          { type: 'namespace', name: 'crm', description: 'CRM', tools: [{ type: 'function', name: 'lookup' }] },
        ],
      },
      expect: {
        native: {
          tools: [
            { function: { name: 'get_weather' } },
            { function: { name: 'mcp__docs__search', parameters: { type: 'object' } } },
            { function: { name: 'crm__lookup' } },
          ],
        },
        echo: {
          tools: [
            { type: 'function', name: 'get_weather' },
            { type: 'web_search' },
            { type: 'namespace', name: 'mcp__docs__' },
            { type: 'namespace', name: 'crm' },
          ],
        },
        names: new Map([
          ['mcp__docs__search', { name: 'search', namespace: 'mcp__docs__' }],
          ['crm__lookup', { name: 'lookup', namespace: 'crm' }],
        ]),
        ignored: ["tools[1] (type 'web_search')", "tools[2].tools[1] (type 'custom')"],
      },
    },
    {
      name: 'a namespaced function is forced by its own name; allowed_tools narrows',
      body: {
        model: 'm',
        input: 'x',
        tools: [weather, { type: 'namespace', name: 'crm', description: 'CRM', tools: [{ type: 'function', name: 'lookup' }] }],
        tool_choice: { type: 'function', name: 'lookup' },
      },
      expect: {
        native: { tools: [{ function: { name: 'crm__lookup' } }], toolChoice: { name: 'crm__lookup' } },
        echo: { tool_choice: { type: 'function', name: 'lookup' } },
      },
    },
    {
      name: 'allowed_tools',
      body: {
        model: 'm',
        input: 'x',
        tools: [weather, { type: 'function', name: 'other' }],
        tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'other' }] },
      },
      expect: { native: { tools: [{ function: { name: 'other' } }] }, echo: { tool_choice: { type: 'allowed_tools', mode: 'auto' } } },
    },
    {
      name: 'input items: namespaced calls carried under the flattened name, other items left out',
      body: {
        model: 'm',
        input: [
          { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'find' }, { type: 'future_part' }] },
          { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'xyz' },
          { type: 'web_search_call', id: 'ws_1', status: 'completed', action: { type: 'search', query: 'q' } },
          { type: 'function_call', call_id: 'c1', name: 'lookup', namespace: 'crm', arguments: '{"id":1}' },
          { type: 'function_call_output', call_id: 'c1', output: [{ type: 'input_text', text: 'found' }] },
          { type: 'message', role: 'developer', content: 'late rule' },
        ],
      },
      expect: {
        native: {
          messages: [
            { role: 'user', content: 'find' },
            { role: 'assistant', content: '', tool_calls: [{ id: 'c1', function: { name: 'crm__lookup', arguments: { id: 1 } } }] },
            { role: 'tool', content: 'found', tool_name: 'crm__lookup' },
            { role: 'system', content: 'late rule' },
          ],
        },
        ignored: ["input[1] (type 'reasoning')", "input[2] (type 'web_search_call')"],
      },
    },
    {
      name: 'what Codex sends beside: include, store false, prompt_cache_key, client_metadata, reasoning.summary',
      body: {
        model: 'm',
        input: 'x',
        store: false,
        include: ['reasoning.encrypted_content'],
        prompt_cache_key: 'k',
        client_metadata: { session: 's' },
        reasoning: { effort: 'medium', summary: 'auto' },
        parallel_tool_calls: true,
        stream: true,
        service_tier: 'auto',
        safety_identifier: 's',
        truncation: 'auto',
        top_logprobs: 0,
        background: false,
      },
      expect: { native: { think: 'auto' }, stream: true, ignored: ['client_metadata'] },
    },
    {
      name: 'none drops the tools but echoes them',
      body: { model: 'm', input: 'x', tools: [weather], tool_choice: 'none' },
      expect: { echo: { tools: [{ name: 'get_weather' }], tool_choice: 'none' } },
    },
    {
      name: 'json_object',
      body: { model: 'm', input: 'x', text: { format: { type: 'json_object' } } },
      expect: { native: { format: 'json' }, echo: { text: { format: { type: 'json_object' } } } },
    },
    {
      name: 'json_schema',
      body: { model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'cat', schema: { type: 'object' }, strict: true }, verbosity: 'low' } },
      expect: {
        native: { format: { type: 'object' } },
        echo: { text: { format: { type: 'json_schema', name: 'cat', schema: { type: 'object' }, strict: true }, verbosity: 'low' } },
      },
    },
  ];
  for (const c of cases) t.match(await translate(c.body), c.expect, c.name);
  const plain = await translate({ model: 'm', input: 'x', text: { format: { type: 'text' } }, tool_choice: 'none' });
  t.notOk('format' in plain.native || 'tools' in plain.native || 'toolChoice' in plain.native, 'text format and no tools add nothing');
});

let deep: Record<string, unknown> = { type: 'string' };
for (let i = 0; i < 80; i++) deep = { type: 'object', properties: { a: deep } };

t.test('refuses what it cannot serve, in OpenAI error shape, naming the param', async (t) => {
  const cases: { name: string; body: Record<string, unknown>; param: string | null; message?: RegExp }[] = [
    { name: 'no model', body: { input: 'x' }, param: 'model' },
    { name: 'no input', body: { model: 'm' }, param: 'input' },
    { name: 'empty input list', body: { model: 'm', input: [] }, param: 'input' },
    { name: 'previous_response_id', body: { model: 'm', input: 'x', previous_response_id: 'resp_1' }, param: 'previous_response_id', message: /stateless/ },
    { name: 'conversation', body: { model: 'm', input: 'x', conversation: 'conv_1' }, param: 'conversation', message: /stateless/ },
    { name: 'background', body: { model: 'm', input: 'x', background: true }, param: 'background' },
    { name: 'bad role', body: { model: 'm', input: [{ role: 'tool', content: 'x' }] }, param: 'input[0].role' },
    {
      name: 'image part, not a data URL',
      body: { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] },
      param: 'input[0].content[0].image_url',
      message: /data: URL/,
    },
    {
      name: 'file part',
      body: { model: 'm', input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] },
      param: 'input[0].content[0].type',
      message: /not supported/,
    },
    { name: 'item reference', body: { model: 'm', input: [{ type: 'item_reference', id: 'msg_1' }] }, param: 'input[0].type', message: /stores no items/ },
    { name: 'item without type or role', body: { model: 'm', input: [{ content: 'x' }] }, param: 'input[0].type' },
    { name: 'call without call_id', body: { model: 'm', input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, param: 'input[0].call_id' },
    {
      name: 'arguments not JSON',
      body: { model: 'm', input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{' }] },
      param: 'input[0].arguments',
    },
    {
      name: 'forced web_search',
      body: { model: 'm', input: 'x', tools: [weather, { type: 'web_search' }], tool_choice: { type: 'web_search_preview' } },
      param: 'tool_choice.type',
      message: /cannot run/,
    },
    {
      name: 'forced mcp',
      body: { model: 'm', input: 'x', tools: [weather], tool_choice: { type: 'mcp', server_label: 's' } },
      param: 'tool_choice.type',
      message: /cannot run/,
    },
    {
      name: 'allowed_tools required, no function listed',
      body: { model: 'm', input: 'x', tools: [weather], tool_choice: { type: 'allowed_tools', mode: 'required', tools: [{ type: 'web_search' }] } },
      param: 'tool_choice',
    },
    {
      name: 'namespace without tools',
      body: { model: 'm', input: 'x', tools: [{ type: 'namespace', name: 'ns', description: 'd' }] },
      param: 'tools[0].tools',
    },
    {
      name: 'namespaced function without name',
      body: { model: 'm', input: 'x', tools: [{ type: 'namespace', name: 'ns', description: 'd', tools: [{ type: 'function' }] }] },
      param: 'tools[0].tools[0].name',
    },
    { name: 'include not an array', body: { model: 'm', input: 'x', include: 'reasoning.encrypted_content' }, param: 'include' },
    { name: 'prompt_cache_key not a string', body: { model: 'm', input: 'x', prompt_cache_key: 7 }, param: 'prompt_cache_key' },
    {
      name: 'deep text.format schema',
      body: { model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'n', schema: deep } } },
      param: 'text.format.schema',
      message: /^text\.format\.schema is nested too deeply/,
    },
    {
      name: 'deep parameters',
      body: { model: 'm', input: 'x', tools: [weather, { type: 'function', name: 'f', parameters: deep }] },
      param: 'tools[1].parameters',
      message: /^tools\[1\]\.parameters is nested/,
    },
    {
      name: 'deep namespaced parameters',
      body: {
        model: 'm',
        input: 'x',
        tools: [{ type: 'namespace', name: 'ns', description: 'd', tools: [{ type: 'function', name: 'f', parameters: deep }] }],
      },
      param: 'tools[0].tools[0].parameters',
    },
    { name: 'stored prompt', body: { model: 'm', input: 'x', prompt: { id: 'pmpt_1' } }, param: 'prompt', message: /stored prompts/ },
    { name: 'tool without name', body: { model: 'm', input: 'x', tools: [{ type: 'function' }] }, param: 'tools[0].name' },
    { name: 'forced without tools', body: { model: 'm', input: 'x', tool_choice: 'required' }, param: 'tool_choice' },
    {
      name: 'forced unknown name',
      body: { model: 'm', input: 'x', tools: [weather], tool_choice: { type: 'function', name: 'nope' } },
      param: 'tool_choice.name',
    },
    { name: 'forced file_search', body: { model: 'm', input: 'x', tools: [weather], tool_choice: { type: 'file_search' } }, param: 'tool_choice.type' },
    { name: 'json_schema without schema', body: { model: 'm', input: 'x', text: { format: { type: 'json_schema', name: 'n' } } }, param: 'text.format.schema' },
    { name: 'json_schema without name', body: { model: 'm', input: 'x', text: { format: { type: 'json_schema', schema: {} } } }, param: 'text.format.name' },
    { name: 'bad format type', body: { model: 'm', input: 'x', text: { format: { type: 'yaml' } } }, param: 'text.format.type' },
    { name: 'max_output_tokens 0', body: { model: 'm', input: 'x', max_output_tokens: 0 }, param: 'max_output_tokens' },
    { name: 'temperature as a string', body: { model: 'm', input: 'x', temperature: '0.5' }, param: 'temperature' },
    { name: 'metadata values are strings', body: { model: 'm', input: 'x', metadata: { a: 1 } }, param: 'metadata.a' },
  ];
  for (const c of cases) {
    const r = await route(c.body);
    t.equal(r.status, 400, `${c.name}: 400`);
    t.same(validateOpenAI('ErrorResponse', r.error), [], `${c.name}: OpenAI error shape`);
    const e = (r.error as { error: { type: string; param: string | null; message: string } }).error;
    t.equal(e.type, 'invalid_request_error', `${c.name}: type`);
    t.equal(e.param, c.param, `${c.name}: param`);
    if (c.message) t.match(e.message, c.message, `${c.name}: message`);
  }
});

const meta = { id: 'resp_test', created: 1_700_000_000, model: 'stories:latest' };
const echo = translateResponseRequest({ model: 'm', input: 'x', tools: [weather] }).echo;
const done = (reason: 'stop' | 'length', p = 4, c = 3): GenerationEvent => ({
  type: 'done',
  reason,
  promptTokens: p,
  completionTokens: c,
  promptEvalNs: 1,
  evalNs: 1,
});
const tok = (text: string): GenerationEvent => ({ type: 'token', text });
const call = (name: string, args: Record<string, unknown>): GenerationEvent => ({ type: 'tool_calls', calls: [{ function: { name, arguments: args } }] });
const ids = (): ItemIds => {
  let n = 0;
  return { message: () => `msg_${++n}`, functionCall: () => `fc_${++n}`, call: () => `call_${++n}` };
};

/** Runs events through an emitter: the stream's events and the final response. */
function run(events: GenerationEvent[]) {
  const em = new ResponseEmitter(meta, echo, ids());
  const stream = [...em.start(), ...events.flatMap((e) => em.next(e)), ...em.finish()];
  return { stream, response: em.response() };
}

t.test('events → stream events and response object', async (t) => {
  const cases: { name: string; events: GenerationEvent[]; types: string[]; status: string; output: unknown[] }[] = [
    {
      name: 'text',
      events: [tok('Once'), tok(''), tok(' upon'), done('stop')],
      types: [
        'created',
        'in_progress',
        'output_item.added',
        'content_part.added',
        'output_text.delta',
        'output_text.delta',
        'output_text.done',
        'content_part.done',
        'output_item.done',
        'completed',
      ],
      status: 'completed',
      output: [
        { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: 'Once upon', annotations: [] }] },
      ],
    },
    {
      name: 'cut by the token limit',
      events: [tok('a'), done('length')],
      types: [
        'created',
        'in_progress',
        'output_item.added',
        'content_part.added',
        'output_text.delta',
        'output_text.done',
        'content_part.done',
        'output_item.done',
        'incomplete',
      ],
      status: 'incomplete',
      output: [{ type: 'message', status: 'incomplete', content: [{ text: 'a' }] }],
    },
    {
      name: 'nothing generated: one empty message',
      events: [done('stop', 2, 0)],
      types: ['created', 'in_progress', 'output_item.added', 'content_part.added', 'output_text.done', 'content_part.done', 'output_item.done', 'completed'],
      status: 'completed',
      output: [{ type: 'message', content: [{ text: '' }] }],
    },
    {
      name: 'a forced call',
      events: [call('get_weather', { city: 'Paris' }), done('stop')],
      types: ['created', 'in_progress', 'output_item.added', 'function_call_arguments.delta', 'function_call_arguments.done', 'output_item.done', 'completed'],
      status: 'completed',
      output: [{ type: 'function_call', id: 'fc_2', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' }],
    },
    {
      name: 'text, then a call',
      events: [tok('ok'), call('get_weather', {}), done('stop')],
      types: [
        'created',
        'in_progress',
        'output_item.added',
        'content_part.added',
        'output_text.delta',
        'output_text.done',
        'content_part.done',
        'output_item.done',
        'output_item.added',
        'function_call_arguments.delta',
        'function_call_arguments.done',
        'output_item.done',
        'completed',
      ],
      status: 'completed',
      output: [
        { type: 'message', content: [{ text: 'ok' }] },
        { type: 'function_call', arguments: '{}', output_index: undefined },
      ],
    },
  ];
  for (const c of cases) {
    const { stream, response } = run(c.events);
    t.same(
      stream.map((e) => e.type.replace(/^response\./, '')),
      c.types,
      `${c.name}: event sequence`,
    );
    t.same(
      stream.map((e) => e.sequence_number),
      stream.map((_, i) => i),
      `${c.name}: sequence numbers`,
    );
    t.same(
      stream.flatMap((e) => validateStreamEvent(e)),
      [],
      `${c.name}: every event conforms`,
    );
    t.same(validateOpenAI('Response', response), [], `${c.name}: the response conforms`);
    t.equal(response.status, c.status, `${c.name}: status`);
    t.match(response.output, c.output, `${c.name}: output`);
    t.same(stream.at(-1)!.response, response, `${c.name}: the last event carries the final response`);
    t.equal(stream[0]!.response && (stream[0]!.response as { status: string }).status, 'in_progress');
    t.same((stream[0]!.response as { output: unknown[] }).output, [], `${c.name}: created has no output yet`);
  }
});

t.test('the response object echoes the request and counts usage', async (t) => {
  const { response } = run([tok('a'), done('length', 7, 1)]);
  t.match(response, {
    id: 'resp_test',
    object: 'response',
    created_at: meta.created,
    model: meta.model,
    error: null,
    incomplete_details: { reason: 'max_output_tokens' },
    completed_at: null,
    store: false,
    previous_response_id: null,
    tools: [{ type: 'function', name: 'get_weather', strict: null }],
    tool_choice: 'auto',
    temperature: null,
    top_p: null,
    usage: { input_tokens: 7, output_tokens: 1, total_tokens: 8, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } },
  });
  const ok = run([tok('a'), done('stop')]).response;
  t.equal(ok.incomplete_details, null);
  t.type(ok.completed_at, 'number');
});

t.test('a failure mid-stream is an error event in sequence', async (t) => {
  const em = new ResponseEmitter(meta, echo, ids());
  const started = em.start();
  const error = em.error(Errors.engineFailed('the runner crashed'));
  t.match(error, { type: 'error', message: 'the runner crashed', param: null, sequence_number: started.length });
  t.same(validateStreamEvent(error), []);
});
