/**
 * Table-driven tests of the response translators: native generation events → `chat.completion`,
 * `chat.completion.chunk` sequences and `text_completion`s; vectors → embedding lists. Every
 * object produced is also validated against the official OpenAI schemas.
 */
import t from 'tap';
import type { GenerationEvent } from '../../core/contracts/index.js';
import { ChatChunker, ChatCollector } from '../../plugins/api-openai/translate/chat-response.js';
import { CompletionCollector, sumUsage, textCompletion } from '../../plugins/api-openai/translate/completion.js';
import { embeddingList, float32Base64 } from '../../plugins/api-openai/translate/embeddings.js';
import { newId, unixSeconds } from '../../plugins/api-openai/translate/shared.js';
import { COMPLETION_CHUNK, validateOpenAI } from '../helpers/openai-schema.js';

const meta = { id: 'chatcmpl-test', created: 1_700_000_000, model: 'stories:latest' };
const done = (reason: 'stop' | 'length', p = 4, c = 3): GenerationEvent => ({
  type: 'done',
  reason,
  promptTokens: p,
  completionTokens: c,
  promptEvalNs: 1,
  evalNs: 1,
});
const tok = (text: string): GenerationEvent => ({ type: 'token', text });
const call = (name: string, args: Record<string, unknown>, id?: string): GenerationEvent => ({
  type: 'tool_calls',
  calls: [{ ...(id ? { id } : {}), function: { name, arguments: args } }],
});
let n = 0;
const ids = () => `call_${++n}`;

const cases: { name: string; events: GenerationEvent[]; content: string | null; finish: string; calls?: unknown[] }[] = [
  { name: 'text, EOS', events: [tok('Once'), tok(' upon'), done('stop')], content: 'Once upon', finish: 'stop' },
  { name: 'text, max tokens', events: [tok('a'), done('length')], content: 'a', finish: 'length' },
  { name: 'empty text', events: [done('stop', 2, 0)], content: '', finish: 'stop' },
  {
    name: 'tool call only: null content, tool_calls finish',
    events: [call('get_weather', { city: 'Paris' }), done('stop')],
    content: null,
    finish: 'tool_calls',
    calls: [{ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
  },
  {
    name: 'text then two tool calls, one with an engine id',
    events: [tok('ok'), call('a', {}), call('b', { x: [1] }, 'call_engine'), done('stop')],
    content: 'ok',
    finish: 'tool_calls',
    calls: [
      { type: 'function', function: { name: 'a', arguments: '{}' } },
      { id: 'call_engine', type: 'function', function: { name: 'b', arguments: '{"x":[1]}' } },
    ],
  },
];

t.test('chat.completion from events', async (t) => {
  for (const c of cases) {
    const col = new ChatCollector(meta, ids);
    for (const e of c.events) col.add(e);
    const out = col.result();
    t.same(validateOpenAI('CreateChatCompletionResponse', out), [], `${c.name}: valid`);
    t.match(out, {
      id: meta.id,
      object: 'chat.completion',
      created: meta.created,
      model: meta.model,
      usage: { total_tokens: out.usage.prompt_tokens + out.usage.completion_tokens },
    });
    const choice = out.choices[0]!;
    t.equal(choice.message.content, c.content, `${c.name}: content`);
    t.equal(choice.finish_reason, c.finish, `${c.name}: finish_reason`);
    t.equal(choice.message.refusal, null);
    t.equal(choice.logprobs, null);
    if (c.calls) {
      t.match(choice.message.tool_calls, c.calls, `${c.name}: tool calls`);
      for (const tc of choice.message.tool_calls!) t.match(tc.id, /^call_/);
    } else t.notOk('tool_calls' in choice.message, `${c.name}: no tool_calls key`);
  }
});

t.test('chat.completion.chunk sequence from events', async (t) => {
  for (const c of cases) {
    for (const includeUsage of [false, true]) {
      const ch = new ChatChunker(meta, ids);
      const chunks = [ch.first()];
      for (const e of c.events) {
        const x = ch.next(e);
        if (x) chunks.push(x);
      }
      chunks.push(ch.last());
      if (includeUsage) chunks.push(ch.usage());
      for (const x of chunks) t.same(validateOpenAI('CreateChatCompletionStreamResponse', x), [], `${c.name}: chunk valid`);
      const withChoice = chunks.filter((x) => x.choices.length > 0);
      t.same(withChoice[0]!.choices[0]!.delta, { role: 'assistant', content: '' }, 'role first');
      const finishes = withChoice.map((x) => x.choices[0]!.finish_reason);
      t.same(
        finishes.slice(0, -1).filter((f) => f !== null),
        [],
        'finish_reason null until the last',
      );
      t.equal(finishes.at(-1), c.finish, `${c.name}: final reason`);
      t.same(withChoice.at(-1)!.choices[0]!.delta, {}, 'final delta is empty');
      const content = withChoice.map((x) => x.choices[0]!.delta.content ?? '').join('');
      t.equal(content, c.content ?? '', `${c.name}: content reassembles`);
      const toolDeltas = withChoice.flatMap((x) => x.choices[0]!.delta.tool_calls ?? []);
      t.same(
        toolDeltas.map((d) => d.index),
        toolDeltas.map((_, i) => i),
        'tool call indexes count up',
      );
      for (const d of toolDeltas) t.ok(d.id && d.type === 'function' && d.function.name, 'first fragment carries id, type, name');
      if (c.calls) t.match(toolDeltas, c.calls);
      const usage = chunks.filter((x) => x.usage);
      if (includeUsage) {
        t.equal(usage.length, 1, 'one usage chunk');
        t.same(chunks.at(-1)!.choices, [], 'usage chunk is last with empty choices');
        const d = c.events.at(-1) as Extract<GenerationEvent, { type: 'done' }>;
        t.same(
          chunks.at(-1)!.usage,
          {
            prompt_tokens: d.promptTokens,
            completion_tokens: d.completionTokens,
            total_tokens: d.promptTokens + d.completionTokens,
          },
          'usage from the done event',
        );
      } else t.equal(usage.length, 0, 'no usage unless asked');
      t.ok(
        chunks.every((x) => x.id === meta.id && x.created === meta.created),
        'chunks share id and created',
      );
    }
  }
});

t.test('text_completion from events', async (t) => {
  const a = new CompletionCollector('Once');
  for (const e of [tok(' upon'), tok(' a'), done('length', 2, 2)]) a.add(e);
  const b = new CompletionCollector();
  for (const e of [tok('x'), done('stop', 1, 1)]) b.add(e);
  const whole = textCompletion(
    { ...meta, id: 'cmpl-x' },
    [
      { text: a.text, index: 0, logprobs: null, finish_reason: a.reason },
      { text: b.text, index: 1, logprobs: null, finish_reason: b.reason },
    ],
    sumUsage([a.usage, b.usage]),
  );
  t.same(validateOpenAI('CreateCompletionResponse', whole), []);
  t.match(whole, {
    object: 'text_completion',
    choices: [
      { text: 'Once upon a', finish_reason: 'length' },
      { text: 'x', finish_reason: 'stop', index: 1 },
    ],
    usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
  });
  const chunk = textCompletion(meta, [{ text: 'a', index: 0, logprobs: null, finish_reason: null }]);
  t.same(validateOpenAI(COMPLETION_CHUNK, chunk), [], 'a streamed chunk with finish_reason null is valid');
  t.notOk('usage' in chunk, 'no usage on content chunks');
});

t.test('embeddings: floats and little-endian float32 base64', async (t) => {
  const vectors = [
    [0.1, -0.25, 1e-8, 3.4e38],
    [1, 0, -1, 0.5],
  ];
  const result = { model: 'emb:latest', embeddings: vectors, promptTokens: 9, loadNs: 0, totalNs: 1 };
  const floats = embeddingList(result, 'float');
  t.same(validateOpenAI('CreateEmbeddingResponse', floats), []);
  t.match(floats, {
    object: 'list',
    model: 'emb:latest',
    usage: { prompt_tokens: 9, total_tokens: 9 },
    data: [{ object: 'embedding', index: 0 }, { index: 1 }],
  });
  t.same(floats.data[0]!.embedding, vectors[0]);
  const b64 = embeddingList(result, 'base64');
  t.same(validateOpenAI('CreateEmbeddingResponse', b64), []);
  for (const [i, v] of vectors.entries()) {
    const bytes = Buffer.from(b64.data[i]!.embedding as string, 'base64');
    t.equal(bytes.length, v.length * 4);
    // Decoded exactly as openai-node does it.
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    t.same(decoded, v.map(Math.fround), `vector ${i} round-trips`);
  }
  t.equal(float32Base64([1]), 'AACAPw==', '1.0f is 00 00 80 3f');
});

t.test('ids and timestamps', async (t) => {
  t.match(newId('chatcmpl-'), /^chatcmpl-[0-9a-f]{24}$/);
  t.not(newId('call_'), newId('call_'));
  t.equal(unixSeconds(1_700_000_000_999), 1_700_000_000);
});
