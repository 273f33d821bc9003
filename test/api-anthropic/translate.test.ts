/**
 * The Messages translators, table-driven: request bodies → native chat requests, native events →
 * messages and stream events, statuses → Anthropic error types. Pure functions, no appliance.
 */
import t from 'tap';
import type { GenerationEvent } from '../../core/index.js';
import { isAppError } from '../../core/index.js';
import { anthropicErrorType } from '../../plugins/api-anthropic/errors.js';
import { xApiKey } from '../../plugins/api-anthropic/auth.js';
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
    ['system string', { system: 'be brief' }, { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }] }],
    [
      'system blocks joined',
      { system: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b', cache_control: { type: 'ephemeral' } }] },
      { messages: [{ role: 'system', content: 'a\nb' }, { role: 'user', content: 'hi' }] },
    ],
    ['metadata ignored', { metadata: { user_id: 'x' }, thinking: { type: 'enabled', budget_tokens: 1024 } }, { model: 'm', messages: [{ role: 'user', content: 'hi' }] }],
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
    { role: 'user', content: [{ type: 'text', text: 'weather?' }, { type: 'text', text: 'in Paris' }] },
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
    ['image', { messages: [{ role: 'user', content: [image] }] }, 'messages[0].content[0].type', /text only/],
    ['image in a tool_result', { messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: [image] }] }] }, 'messages[0].content[0].content[0].type', /text only/],
    ['unknown block', { messages: [{ role: 'user', content: [{ type: 'hologram' }] }] }, 'messages[0].content[0].type', /hologram/],
    ['tool_use from the user', { messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'a', name: 'b', input: {} }] }] }, 'messages[0].content[0].type', /assistant/],
    ['tool_use without input', { messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'b' }] }] }, 'messages[0].content[0].input', /object/],
    ['text without text', { messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0].text', /string/],
    ['server tool', { tools: [{ type: 'web_search_20250305', name: 'web_search', input_schema: {} }] }, 'tools[0].type', /server tools/],
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

t.test('count request: no forced choice, the tools kept', async (t) => {
  const native = translateCountRequest({ ...base, tools: [tool], tool_choice: { type: 'any' } } as MessagesBody);
  t.equal(native.toolChoice, undefined);
  t.equal(native.tools!.length, 1, 'the tools stay: they are part of the prompt');
});

const done = (extra: Partial<Extract<GenerationEvent, { type: 'done' }>> = {}): GenerationEvent => ({
  type: 'done', reason: 'stop', promptTokens: 7, completionTokens: 3, promptEvalNs: 1, evalNs: 1, ...extra,
});
const call = (name: string, args: Record<string, unknown>): GenerationEvent => ({ type: 'tool_calls', calls: [{ id: 'call_x', function: { name, arguments: args } }] });
const meta = { id: 'msg_1', model: 'stories:latest' };
const ids = () => {
  let n = 0;
  return () => `toolu_${++n}`;
};

t.test('collected message: content and stop reasons', async (t) => {
  const cases: [string, GenerationEvent[], Record<string, unknown>][] = [
    ['end_turn', [{ type: 'token', text: 'Hel' }, { type: 'token', text: 'lo' }, done()], { content: [{ type: 'text', text: 'Hello' }], stop_reason: 'end_turn', stop_sequence: null }],
    ['max_tokens', [{ type: 'token', text: 'a' }, done({ reason: 'length' })], { stop_reason: 'max_tokens', stop_sequence: null }],
    ['stop_sequence', [{ type: 'token', text: 'a' }, done({ stopSequence: 'END' })], { stop_reason: 'stop_sequence', stop_sequence: 'END' }],
    [
      'tool_use',
      [call('get_weather', { city: 'Paris' }), done()],
      { content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }], stop_reason: 'tool_use' },
    ],
    ['nothing', [done()], { content: [], stop_reason: 'end_turn' }],
  ];
  for (const [name, events, want] of cases) {
    const c = new MessageCollector(meta, ids());
    for (const e of events) c.add(e);
    const msg = c.result();
    t.match(msg, { id: 'msg_1', type: 'message', role: 'assistant', model: 'stories:latest', usage: { input_tokens: 7, output_tokens: 3 }, ...want }, name);
    t.same(msg.content, want['content'] ?? msg.content, `${name}: exact content`);
  }
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
      message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'stories:latest', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } },
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
  t.same(tail.map((e) => e.type), ['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
  t.match(tail[3], { delta: { stop_reason: 'max_tokens' } });
});

t.test('error types follow the status', async (t) => {
  const cases: [number, string][] = [
    [400, 'invalid_request_error'], [401, 'authentication_error'], [403, 'permission_error'], [404, 'not_found_error'],
    [405, 'invalid_request_error'], [413, 'request_too_large'], [429, 'rate_limit_error'], [500, 'api_error'],
    [502, 'api_error'], [503, 'overloaded_error'],
  ];
  for (const [status, type] of cases) t.equal(anthropicErrorType(status), type, String(status));
});

t.test('x-api-key header', async (t) => {
  t.equal(xApiKey({ headers: { 'x-api-key': ' lia_k ' } }), 'lia_k');
  t.equal(xApiKey({ headers: { 'x-api-key': '' } }), null);
  t.equal(xApiKey({ headers: {} }), null);
});
