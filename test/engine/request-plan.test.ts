/**
 * The request plan, the one place a request's tools, output format, thinking and forced calls are
 * decided (plugins/engine/plan/): what a backend is given for a local and a remote model, the
 * answer schema both GGUF engines compile, the 400s before any model is loaded, and how a forced
 * call's text becomes the call a client sees.
 */
import t from 'tap';
import type { GenerationEvent, ToolDefinition } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { forcedCallSchema, formatSchema } from '../../plugins/engine/plan/answer-schema.js';
import { asForcedCall, callOf } from '../../plugins/engine/plan/forced-call.js';
import { planChat, planGenerate, toolChoice } from '../../plugins/engine/plan/request-plan.js';

const weather: ToolDefinition = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] } },
};
const time: ToolDefinition = { type: 'function', function: { name: 'get_time' } };
const local = { name: 'm:latest', capabilities: ['completion'] } as unknown as ResolvedModel;
const thinker = { name: 't:latest', capabilities: ['completion', 'thinking'] } as unknown as ResolvedModel;
const remote = { ...local, remote: { host: 'https://up', model: 'm' } } as unknown as ResolvedModel;

async function collect(events: AsyncIterable<GenerationEvent>): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}
async function* stream(...events: GenerationEvent[]): AsyncIterable<GenerationEvent> {
  yield* events;
}
const done = (reason: 'stop' | 'length'): GenerationEvent => ({ type: 'done', reason, promptTokens: 3, completionTokens: 5, promptEvalNs: 1, evalNs: 1 });

t.test('tool choice: what the backend gets, and the 400s before a load', async (t) => {
  const tools = [weather, time];
  t.same(toolChoice(tools, undefined), { tools }, 'auto by default');
  t.same(toolChoice(tools, 'auto'), { tools });
  t.same(toolChoice(tools, 'none'), {}, 'none drops the tools');
  t.same(toolChoice(undefined, 'none'), {});
  t.same(toolChoice(tools, 'required'), { tools, choice: 'required' });
  t.same(toolChoice(tools, { name: 'get_time' }), { tools, choice: { name: 'get_time' } });
  t.throws(() => toolChoice([], 'required'), { statusCode: 400, message: /needs tools/ });
  t.throws(() => toolChoice(undefined, { name: 'f' }), { statusCode: 400, message: /needs tools/ });
  t.throws(() => toolChoice(tools, { name: 'h' }), { statusCode: 400, message: /"h" is not one of the tools/ });
  t.throws(() => toolChoice(tools, 'sometimes' as never), { statusCode: 400, message: /invalid tool choice/ });
});

t.test('a local model gets one answer schema; a remote one the fields as sent', async (t) => {
  const forced = planChat(local, 'm', { tools: [weather, time], toolChoice: 'required' });
  t.same(Object.keys(forced.fields).sort(), ['constraint', 'tools'], 'local forced call: the tools (for the prompt) and the schema, no toolChoice');
  t.match(forced.fields.constraint, {
    schema: { oneOf: [{ properties: { name: { const: 'get_weather' } } }, { properties: { name: { const: 'get_time' } } }] },
  });
  t.same(forced.options({ stop: ['}'], temperature: 0 }), { temperature: 0 }, 'a forced call has no stop sequences');

  const format = planChat(local, 'm', { format: 'json', stream: false, logprobs: 2 });
  t.match(format.fields, { constraint: { schema: 'json', grammar: /^root ::= object$/m }, whole: true, logprobs: 2 });
  t.same(Object.keys(format.fields).sort(), ['constraint', 'logprobs', 'whole']);
  t.same(format.options({ stop: ['x'] }), { stop: ['x'] }, 'a format keeps its stops');
  t.same(planChat(local, 'm', { format: '' }).fields, {}, 'an empty format is none');
  t.same(planChat(local, 'm', { format: null }).fields, {});

  const both = planChat(local, 'm', { tools: [weather], toolChoice: { name: 'get_weather' }, format: { type: 'object' } });
  t.same(both.fields.constraint?.schema, forcedCallSchema([weather], { name: 'get_weather' }), 'beside a forced call the format has nothing to shape');

  const upstream = planChat(remote, 'm', { tools: [weather], toolChoice: 'required', format: 'json' });
  t.same(upstream.fields, { tools: [weather], toolChoice: 'required', format: 'json' }, 'a remote model plans its own answer');
  t.same(planGenerate(remote, 'm', { format: 'json' }).fields, { format: 'json' });
  t.same(planGenerate(local, 'm', { format: { type: 'object', properties: { a: { type: 'integer' } } } }).fields.constraint?.schema, {
    type: 'object',
    properties: { a: { type: 'integer' } },
    required: ['a'],
  });
});

t.test('thinking: split where asked of a model that thinks, off in the prompt with false', async (t) => {
  t.same(planChat(thinker, 't', { think: true }).fields, { think: true });
  t.same(planChat(thinker, 't', { think: 'auto' }).fields, { think: true });
  t.same(planChat(local, 'm', { think: 'auto' }).fields, {}, 'auto on a model without thinking: the template default');
  t.same(planChat(local, 'm', { think: false }).fields, { think: false });
  t.throws(() => planChat(local, 'm', { think: true }), { statusCode: 400, message: /"m" does not support thinking/ });
  const split = await collect(planChat(thinker, 't', { think: true }).read(stream({ type: 'token', text: '<think>hm</think>yes' }, done('stop'))));
  t.match(split, [{ type: 'thinking', text: 'hm' }, { type: 'token', text: 'yes' }, { type: 'done' }]);
});

t.test('the answer schema: one subset both GGUF engines compile alike', async (t) => {
  t.same(
    forcedCallSchema([weather, time], { name: 'get_weather' }),
    { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city', 'unit'] },
    'named: the parameters, every declared property generated',
  );
  t.same(forcedCallSchema([weather, time], { name: 'get_time' }), { type: 'object', properties: {}, required: [] }, 'no parameters: {}');
  t.same(
    forcedCallSchema([weather, time], 'required'),
    {
      oneOf: [
        {
          type: 'object',
          properties: {
            name: { const: 'get_weather' },
            arguments: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city', 'unit'] },
          },
          required: ['name', 'arguments'],
        },
        {
          type: 'object',
          properties: { name: { const: 'get_time' }, arguments: { type: 'object', properties: {}, required: [] } },
          required: ['name', 'arguments'],
        },
      ],
    },
    'required: one branch per tool, name first',
  );
  t.same(formatSchema({ anyOf: [{ type: 'string' }, { type: 'null' }] }), { oneOf: [{ type: 'string' }, { type: 'null' }] });
  t.same(formatSchema({ type: ['integer', 'null'] }), { oneOf: [{ type: 'integer' }, { type: 'null' }] });
  t.same(formatSchema({ type: 'string', format: 'email', maxLength: 9 }), { type: 'string', maxLength: 9 }, 'unknown formats dropped');
  t.same(formatSchema({ type: 'string', format: 'date' }), { type: 'string', format: 'date' });
  t.same(formatSchema({ type: 'string', enum: ['c', 'f'] }), { enum: ['c', 'f'] });
  t.same(formatSchema({ properties: { a: { $ref: '#/definitions/A' } }, definitions: { A: { type: 'boolean' } } }), {
    type: 'object',
    properties: { a: { $ref: '#/$defs/A' } },
    required: ['a'],
    $defs: { A: { type: 'boolean' } },
  });
  t.same(formatSchema({ type: 'array', items: [{ type: 'number' }], additionalItems: false }), {
    type: 'array',
    prefixItems: [{ type: 'number' }],
    maxItems: 1,
  });
  t.match(formatSchema({}), { oneOf: Array }, 'no type: any JSON value');
  for (const [bad, message] of [
    [{ allOf: [] }, /"allOf" is not supported/],
    [{ not: {} }, /"not" is not supported/],
    [{ $ref: 'https://example.com/s.json' }, /only local references/],
    [{ type: 'object', oneOf: [{ type: 'object' }] }, /next to "type"/],
    [{ const: { a: 1 } }, /constants/],
    [{ type: 'date' }, /unknown type/],
  ] as const) {
    t.throws(() => formatSchema(bad), { statusCode: 400, message }, JSON.stringify(bad));
  }
  const allOf: ToolDefinition = {
    type: 'function',
    function: { name: 'f', parameters: { type: 'object', properties: { a: { allOf: [{ type: 'string' }] } } } },
  };
  t.throws(
    () => planChat(local, 'm', { tools: [allOf], toolChoice: 'required' }),
    { statusCode: 400, message: /allOf/ },
    'refused at the plan, on every engine',
  );
  t.throws(() => forcedCallSchema([{ type: 'function', function: { name: 'f', parameters: { type: 'string' } } }], 'required'), {
    message: /must be a JSON schema of type "object"/,
  });
});

t.test("a forced call's text becomes the call; a cut one ends with length and nothing", async (t) => {
  t.match(callOf('{"city": "Paris"}', [weather], { name: 'get_weather' }), { function: { index: 0, name: 'get_weather', arguments: { city: 'Paris' } } });
  t.match(callOf('{"name": "get_time", "arguments": {}}', [weather, time], 'required'), { function: { name: 'get_time', arguments: {} } });
  t.equal(callOf('{"city": "Par', [weather], { name: 'get_weather' }), undefined, 'cut short: no call');
  t.equal(callOf('{"name": "other", "arguments": {}}', [weather], 'required'), undefined, 'an unknown name: no call');
  t.equal(callOf('[]', [weather], { name: 'get_weather' }), undefined, 'not an object: no call');

  const made = await collect(
    asForcedCall(
      stream({ type: 'token', text: '{"name": "get_time", ' }, { type: 'token', text: '"arguments": {}}' }, done('stop')),
      [weather, time],
      'required',
    ),
  );
  t.match(
    made,
    [
      { type: 'tool_calls', calls: [{ function: { name: 'get_time', arguments: {} } }] },
      { type: 'done', reason: 'stop' },
    ],
    'no text, one call, then done',
  );
  const cut = await collect(asForcedCall(stream({ type: 'token', text: '{"na' }, done('length')), [weather], 'required'));
  t.same(cut, [done('length')], 'cut: only done, with length');
  const broken = await collect(asForcedCall(stream({ type: 'token', text: 'hello' }, done('stop')), [weather], 'required'));
  t.same(broken, [{ ...done('stop'), reason: 'length' }], 'a complete answer that is no call ends like a cut one');
});

t.test('the grammar: one GBNF for both engines, JSON written one way', async (t) => {
  const { grammar } = planChat(local, 'm', { tools: [weather, time], toolChoice: { name: 'get_weather' } }).fields.constraint!;
  const root = /^root ::= (.*)$/m.exec(grammar)![1]!;
  t.equal(root, '"{" "\\"city\\"" ":" ws r0 "," ws "\\"unit\\"" ":" ws r1 "}"', 'every declared property, in order, a space after ":" and ","');
  t.match(grammar, /^ws ::= " "$/m, 'the only whitespace: one space');
  t.match(grammar, /^r0 ::= string$/m);
  for (const name of ['string', 'char']) t.match(grammar, new RegExp(`^${name} ::= `, 'm'), `${name} is defined`);
  t.notMatch(grammar, /^object ::= /m, 'what the schema does not use is left out');
  const required = planChat(local, 'm', { tools: [weather, time], toolChoice: 'required' }).fields.constraint!.grammar;
  t.match(required, /^root ::= \(r\d+ \| r\d+\)$/m, 'required: one alternative per tool');
  t.match(required, /"\\"get_time\\""/, "a tool's name is a literal");
  const bounded = planGenerate(local, 'm', {
    format: { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', maxLength: 3 }, minItems: 1, maxItems: 2 } } },
  }).fields.constraint!.grammar;
  t.match(bounded, /"\[" r\d+ \("," ws r\d+\)\{0,1\} "\]"/, 'one to two items');
  t.match(bounded, /"\\"" char\{0,3\} "\\""/, 'at most three characters');
});
