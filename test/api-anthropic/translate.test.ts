/**
 * The Messages translators, table-driven: request bodies → native chat requests, native events →
 * messages and stream events, statuses → Anthropic error types. Pure functions, no appliance.
 */
import t from 'tap';
import type { GenerationEvent } from 'lia/engine';
import { isAppError } from '../../core/index.js';
import { anthropicErrorType } from '../../plugins/api-anthropic/errors.js';
import { translateCountRequest, translateMessagesRequest } from '../../plugins/api-anthropic/translate/request.js';
import { MessageCollector, StreamTranslator } from '../../plugins/api-anthropic/translate/response.js';
import type { MessagesBody } from '../../plugins/api-anthropic/translate/schemas.js';

const base = { model: 'm', max_tokens: 16, messages: [{ role: 'user' as const, content: 'hi' }] };
const body = (extra: Record<string, unknown>) => ({ ...base, ...extra }) as MessagesBody;
const tool = { name: 'get_weather', description: 'weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } };
const other = { name: 'get_time', input_schema: { type: 'object' } };

t.test('request: sampling, system, stream', async (t) => {
  const cases: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['max_tokens only', {}, { options: { num_predict: 16 } }],
    [
      'sampling fields',
      { temperature: 0.5, top_p: 0.9, top_k: 40, stop_sequences: ['END', ''] },
      { options: { num_predict: 16, temperature: 0.5, top_p: 0.9, top_k: 40, stop: ['END'] } },
    ],
    [
      'system string',
      { system: 'be brief' },
      {
        messages: [
          { role: 'system', content: 'be brief' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'system blocks joined',
      {
        system: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b', cache_control: { type: 'ephemeral' } },
        ],
      },
      {
        messages: [
          { role: 'system', content: 'a\nb' },
          { role: 'user', content: 'hi' },
        ],
      },
    ],
    [
      'metadata ignored',
      { metadata: { user_id: 'x' }, thinking: { type: 'enabled', budget_tokens: 1024 } },
      { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
    ],
  ];
  for (const [name, extra, want] of cases) t.match(translateMessagesRequest(body(extra)).native, want, name);
  t.equal(translateMessagesRequest(body({})).stream, false, 'stream defaults to false');
  t.equal(translateMessagesRequest(body({ stream: true })).stream, true);
});

t.test('request: tools and tool_choice', async (t) => {
  const fn = (x: typeof tool | typeof other) => ({ type: 'function', function: { name: x.name, parameters: x.input_schema } });
  const cases: [string, Record<string, unknown>, { tools?: unknown; toolChoice?: unknown }][] = [
    ['no tools', {}, {}],
    ['auto by default', { tools: [tool, other] }, { tools: [fn(tool), fn(other)] }],
    ['auto', { tools: [tool], tool_choice: { type: 'auto' } }, { tools: [fn(tool)] }],
    ['any → required', { tools: [tool, other], tool_choice: { type: 'any' } }, { tools: [fn(tool), fn(other)], toolChoice: 'required' }],
    ['tool → that one', { tools: [tool, other], tool_choice: { type: 'tool', name: 'get_time' } }, { tools: [fn(other)], toolChoice: { name: 'get_time' } }],
    ['none drops tools', { tools: [tool], tool_choice: { type: 'none' } }, {}],
  ];
  for (const [name, extra, want] of cases) {
    const native = translateMessagesRequest(body(extra)).native;
    t.match({ tools: native.tools, toolChoice: native.toolChoice }, want, name);
    if (!want.tools) t.equal(native.tools, undefined, `${name}: no tools`);
    if (!want.toolChoice) t.equal(native.toolChoice, undefined, `${name}: no choice`);
  }
  t.equal(translateMessagesRequest(body({ tools: [tool] })).native.tools![0]!.function.description, 'weather');
});

t.test('request: messages with content blocks', async (t) => {
  const messages = [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'weather?' },
        { type: 'text', text: 'in Paris' },
      ],
    },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: '…', signature: 's' },
        { type: 'text', text: 'Let me look.' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'thanks' },
        { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] },
      ],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'unknown', is_error: true }] },
  ];
  t.same(translateMessagesRequest(body({ messages })).native.messages, [
    { role: 'user', content: 'weather?\nin Paris' },
    { role: 'assistant', content: 'Let me look.', tool_calls: [{ id: 'toolu_1', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: 'sunny', tool_name: 'get_weather' },
    { role: 'user', content: 'thanks' },
    { role: 'tool', content: '' },
  ]);
});

t.test('request: 400s naming the field', async (t) => {
  const image = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'x' } };
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    [
      'image from a URL that is not http(s)',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'file:///etc/passwd' } }] }] },
      'messages[0].content[0].source.url',
      /data: URL/,
    ],
    [
      'image from a file',
      { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'file', file_id: 'f' } }] }] },
      'messages[0].content[0].source.type',
      /base64/,
    ],
    ['image from the assistant', { messages: [{ role: 'assistant', content: [image] }] }, 'messages[0].content[0].type', /assistant/],
    [
      'document',
      { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', data: 'x', media_type: 'text/plain' } }] }] },
      'messages[0].content[0].type',
      /text and images/,
    ],
    [
      'image in a tool_result',
      { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: [image] }] }] },
      'messages[0].content[0].content[0].type',
      /text only/,
    ],
    [
      'tool_use from the user',
      { messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'a', name: 'b', input: {} }] }] },
      'messages[0].content[0].type',
      /assistant/,
    ],
    [
      'tool_use without input',
      { messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'b' }] }] },
      'messages[0].content[0].input',
      /object/,
    ],
    ['text without text', { messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0].text', /string/],
    ['custom tool without input_schema', { tools: [{ name: 'f' }] }, 'tools[0].input_schema', /required/],
    ['custom tool without name', { tools: [{ type: 'custom', input_schema: {} }] }, 'tools[0].name', /required/],
    [
      'forced server tool',
      { tools: [tool, { type: 'web_search_20250305', name: 'web_search' }], tool_choice: { type: 'tool', name: 'web_search' } },
      'tool_choice.name',
      /cannot run/,
    ],
    ['any with only server tools', { tools: [{ type: 'bash_20250124', name: 'bash' }], tool_choice: { type: 'any' } }, 'tool_choice', /needs 'tools'/],
    ['output_config.format not json_schema', { output_config: { format: { type: 'yaml' } } }, 'output_config.format.type', /json_schema/],
    ['output_config.format without a schema', { output_config: { format: { type: 'json_schema' } } }, 'output_config.format.schema', /required/],
    ['forced choice without tools', { tool_choice: { type: 'any' } }, 'tool_choice', /needs 'tools'/],
    ['forced unknown tool', { tools: [tool], tool_choice: { type: 'tool', name: 'nope' } }, 'tool_choice.name', /nope/],
  ];
  for (const [name, extra, param, message] of cases) {
    let err: unknown;
    try {
      translateMessagesRequest(body(extra));
    } catch (e) {
      err = e;
    }
    t.ok(isAppError(err) && err.statusCode === 400, `${name}: a 400`);
    t.match(err, { param, message }, name);
  }
});

t.test('request: what Claude Code sends and the spec defines is mapped or left out, never refused', async (t) => {
  const cases: [string, Record<string, unknown>, Record<string, unknown>, string[]][] = [
    [
      'system turns: leading ones merged into the system prompt, later ones kept in place',
      {
        system: 'base',
        messages: [
          { role: 'system', content: 'lead' },
          { role: 'user', content: 'hi' },
          { role: 'system', content: [{ type: 'text', text: 'late', cache_control: { type: 'ephemeral' } }] },
          { role: 'user', content: 'again' },
        ],
      },
      {
        messages: [
          { role: 'system', content: 'base\n\nlead' },
          { role: 'user', content: 'hi' },
          { role: 'system', content: 'late' },
          { role: 'user', content: 'again' },
        ],
      },
      [],
    ],
    [
      'developer is system',
      {
        messages: [
          { role: 'developer', content: 'rules' },
          { role: 'user', content: 'hi' },
        ],
      },
      {
        messages: [
          { role: 'system', content: 'rules' },
          { role: 'user', content: 'hi' },
        ],
      },
      [],
    ],
    ['adaptive thinking', { thinking: { type: 'adaptive' }, output_config: { effort: 'high' } }, { think: 'auto' }, []],
    ['enabled thinking with a budget', { thinking: { type: 'enabled', budget_tokens: 2048 } }, { think: 'auto' }, []],
    ['disabled thinking', { thinking: { type: 'disabled' } }, { think: false }, []],
    [
      'output_config.format → the schema',
      { output_config: { format: { type: 'json_schema', schema: { type: 'object' } } } },
      { format: { type: 'object' } },
      [],
    ],
    ['output_format (older beta) → the schema', { output_format: { type: 'json_schema', schema: { type: 'object' } } }, { format: { type: 'object' } }, []],
    [
      'server and built-in tools left out, custom ones kept',
      {
        tools: [
          { type: 'web_search_20250305', name: 'web_search', max_uses: 3 },
          tool,
          { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' },
          { type: 'custom', ...other },
        ],
      },
      { tools: [{ function: { name: 'get_weather' } }, { function: { name: 'get_time' } }] },
      ["tools[0] (type 'web_search_20250305')", "tools[2] (type 'text_editor_20250728')"],
    ],
    [
      'server tool blocks and new block types left out, thinking dropped',
      {
        messages: [
          { role: 'user', content: 'hi' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'hm', signature: 's' },
              { type: 'server_tool_use', id: 's1', name: 'web_search', input: {} },
              { type: 'text', text: 'ok' },
            ],
          },
          { role: 'user', content: [{ type: 'hologram' }, { type: 'text', text: 'go' }] },
        ],
      },
      {
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: 'go' },
        ],
      },
      ["messages[1].content[1] (type 'server_tool_use')", "messages[2].content[0] (type 'hologram')"],
    ],
    [
      'fields without effect, and fields newer than this server',
      {
        context_management: { edits: [{ type: 'clear_tool_uses_20250919' }] },
        metadata: { user_id: 'u' },
        service_tier: 'auto',
        container: null,
        brand_new_field: 1,
      },
      { model: 'm' },
      ['brand_new_field'],
    ],
  ];
  for (const [name, extra, want, ignored] of cases) {
    const r = translateMessagesRequest(body(extra));
    t.match(r.native, want, name);
    if ('think' in want && want['think'] === undefined) t.notOk('think' in r.native, `${name}: no think`);
    t.same(r.ignored, ignored, `${name}: reported as ignored`);
  }
});

t.test("the schema bound is reported under the client's path", async (t) => {
  let deep: Record<string, unknown> = { type: 'string' };
  for (let i = 0; i < 80; i++) deep = { type: 'object', properties: { a: deep } };
  const cases: [string, Record<string, unknown>, string][] = [
    [
      'input_schema',
      {
        tools: [
          { type: 'web_search_20250305', name: 'web_search' },
          { name: 'deep', input_schema: deep },
        ],
      },
      'tools[1].input_schema',
    ],
    ['output_config.format.schema', { output_config: { format: { type: 'json_schema', schema: deep } } }, 'output_config.format.schema'],
  ];
  for (const [name, extra, param] of cases) {
    t.throws(
      () => translateMessagesRequest(body(extra)),
      { statusCode: 400, param, message: new RegExp(`^${param.replace(/[[\].]/g, '\\$&')}.*nested too deeply`) },
      name,
    );
  }
});

t.test('count request: no forced choice, the tools kept', async (t) => {
  const { native } = translateCountRequest({ ...base, tools: [tool], tool_choice: { type: 'any' } });
  t.equal(native.toolChoice, undefined);
  t.equal(native.tools!.length, 1, 'the tools stay: they are part of the prompt');
});

const done = (extra: Partial<Extract<GenerationEvent, { type: 'done' }>> = {}): GenerationEvent => ({
  type: 'done',
  reason: 'stop',
  promptTokens: 7,
  completionTokens: 3,
  promptEvalNs: 1,
  evalNs: 1,
  ...extra,
});
const call = (name: string, args: Record<string, unknown>): GenerationEvent => ({
  type: 'tool_calls',
  calls: [{ id: 'call_x', function: { name, arguments: args } }],
});
const meta = { id: 'msg_1', model: 'stories:latest' };
const ids = () => {
  let n = 0;
  return () => `toolu_${++n}`;
};

t.test('collected message: content and stop reasons', async (t) => {
  const cases: [string, GenerationEvent[], Record<string, unknown>][] = [
    [
      'end_turn',
      [{ type: 'token', text: 'Hel' }, { type: 'token', text: 'lo' }, done()],
      { content: [{ type: 'text', text: 'Hello' }], stop_reason: 'end_turn', stop_sequence: null },
    ],
    ['max_tokens', [{ type: 'token', text: 'a' }, done({ reason: 'length' })], { stop_reason: 'max_tokens', stop_sequence: null }],
    ['stop_sequence', [{ type: 'token', text: 'a' }, done({ stopSequence: 'END' })], { stop_reason: 'stop_sequence', stop_sequence: 'END' }],
    [
      'tool_use',
      [call('get_weather', { city: 'Paris' }), done()],
      { content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }], stop_reason: 'tool_use' },
    ],
    ['nothing', [done()], { content: [{ type: 'text', text: '' }], stop_reason: 'end_turn' }],
    [
      'only thinking',
      [{ type: 'thinking', text: 'hm' }, done()],
      {
        content: [
          { type: 'thinking', thinking: 'hm', signature: '' },
          { type: 'text', text: '' },
        ],
      },
    ],
  ];
  for (const [name, events, want] of cases) {
    const c = new MessageCollector(meta, ids());
    for (const e of events) c.add(e);
    const msg = c.result();
    t.match(msg, { id: 'msg_1', type: 'message', role: 'assistant', model: 'stories:latest', usage: { input_tokens: 7, output_tokens: 3 }, ...want }, name);
    t.same(msg.content, want['content'] ?? msg.content, `${name}: exact content`);
  }
});

t.test('usage splits the prompt into cached and evaluated tokens as Anthropic does', async (t) => {
  const c = new MessageCollector(meta, ids());
  c.add({ type: 'token', text: 'Hi' });
  c.add(done({ promptTokens: 700, cachedTokens: 650 }));
  t.same(c.result().usage, { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 650, output_tokens: 3 });
  const s = new StreamTranslator(meta, ids());
  const out = [...s.next({ type: 'token', text: 'x' }), ...s.next(done({ promptTokens: 9, cachedTokens: 0 })), ...s.finish()];
  t.match(
    out.find((e) => e.type === 'message_delta'),
    { usage: { input_tokens: 9, cache_read_input_tokens: 0, output_tokens: 3 } },
    'nothing cached: all evaluated',
  );
});

t.test('stream events: order, indexes, deltas', async (t) => {
  const s = new StreamTranslator(meta, ids());
  const out = [
    ...s.start(),
    ...s.next({ type: 'token', text: 'Hi' }),
    ...s.next({ type: 'token', text: '' }),
    ...s.next({ type: 'token', text: '!' }),
    ...s.next(call('get_weather', { city: 'Paris' })),
    ...s.next(done()),
    ...s.finish(),
  ];
  t.same(out, [
    {
      type: 'message_start',
      message: {
        id: 'msg_1',
        type: 'message',
        role: 'assistant',
        model: 'stories:latest',
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 },
      },
    },
    { type: 'ping' },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: '!' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} } },
    { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"city":"Paris"}' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { input_tokens: 7, output_tokens: 3 } },
    { type: 'message_stop' },
  ]);

  const plain = new StreamTranslator(meta);
  const tail = [...plain.next({ type: 'token', text: 'x' }), ...plain.next(done({ reason: 'length' })), ...plain.finish()];
  t.same(
    tail.map((e) => e.type),
    ['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
  );
  t.match(tail[3], { delta: { stop_reason: 'max_tokens' } });

  const empty = new StreamTranslator(meta);
  const none = [...empty.next({ type: 'token', text: '' }), ...empty.next(done({ stopSequence: 'e' })), ...empty.finish()];
  t.same(
    none.slice(0, 2),
    [
      { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
      { type: 'content_block_stop', index: 0 },
    ],
    'a turn that wrote nothing still ends with an (empty) text block',
  );
  t.match(none[2], { type: 'message_delta', delta: { stop_reason: 'stop_sequence' } });
});

t.test('error types follow the status', async (t) => {
  const cases: [number, string][] = [
    [400, 'invalid_request_error'],
    [401, 'authentication_error'],
    [403, 'permission_error'],
    [404, 'not_found_error'],
    [405, 'invalid_request_error'],
    [413, 'request_too_large'],
    [429, 'rate_limit_error'],
    [500, 'api_error'],
    [502, 'api_error'],
    [503, 'overloaded_error'],
  ];
  for (const [status, type] of cases) t.equal(anthropicErrorType(status), type, String(status));
});
