/**
 * The engine's pure parts, table-driven: keep_alive parsing, thread and memory policy, option
 * validation and layering, sampling defaults, Go-template handling, chat-history conversion and the
 * GGUF memory estimate (read from the real fixtures).
 */
import t from 'tap';
import { ChatMLChatWrapper, Llama3ChatWrapper } from 'node-llama-cpp';
import { toChatHistory, toFunctions, toolCallId, toToolCalls } from '../../plugins/backend-llama-cpp/runner/history.js';
import { maxTokensFor, toLlamaSampling } from '../../plugins/backend-llama-cpp/runner/sampling.js';
import { StopDetector } from '../../plugins/backend-llama-cpp/runner/stops.js';
import { estimateBytes, fileBytes, goTemplateFamily, readShape, renderGoTemplate } from 'lia/gguf';
import { wrapperForGoTemplate } from '../../plugins/backend-llama-cpp/runner/templates.js';
import { parseGoDuration, parseKeepAlive } from '../../plugins/engine/keep-alive.js';
import { cgroupMemoryLimit, memoryBudget } from '../../plugins/engine/memory.js';
import { mergeOptions, parseSamplingOptions } from '../../plugins/engine/request-options.js';
import { availableCores, cgroupCpuLimit, inferenceThreads } from '../../plugins/engine/threads.js';
import { fixture } from '../helpers/fixtures.js';

t.test('keep_alive: seconds, Go durations, negative = forever', async (t) => {
  const cases: [unknown, number | undefined][] = [
    [undefined, undefined],
    [null, undefined],
    [0, 0],
    [30, 30_000],
    [1.5, 1500],
    [-1, Infinity],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['300ms', 300],
    ['1.5s', 1500],
    ['-1m', Infinity],
    ['0', 0],
  ];
  for (const [input, want] of cases) t.equal(parseKeepAlive(input), want, JSON.stringify(input));
  for (const bad of ['300', '5 minutes', 'm', '', true, {}]) {
    t.throws(() => parseKeepAlive(bad), { statusCode: 400, name: 'AppError' }, `rejects ${JSON.stringify(bad)}`);
  }
  t.equal(parseGoDuration('2h45m10s'), (2 * 3600 + 45 * 60 + 10) * 1000);
  t.equal(parseGoDuration('10x'), null);
});

t.test('threads: 1 on ≤ 2 cores, cores − 1 from 4, the setting wins, cgroup quota caps', async (t) => {
  t.equal(inferenceThreads(0, 1), 1);
  t.equal(inferenceThreads(0, 2), 1);
  t.equal(inferenceThreads(0, 3), 3);
  t.equal(inferenceThreads(0, 8), 7);
  t.equal(inferenceThreads(6, 2), 6);
  const files = (map: Record<string, string>) => (f: string) => map[f] ?? null;
  t.equal(cgroupCpuLimit(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' })), null);
  t.equal(cgroupCpuLimit(files({ '/sys/fs/cgroup/cpu.max': '200000 100000\n' })), 2);
  t.equal(cgroupCpuLimit(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '150000', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' })), 1.5);
  t.equal(cgroupCpuLimit(files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' })), null);
  t.equal(availableCores(files({ '/sys/fs/cgroup/cpu.max': '200000 100000' }), 32), 2, 'a 2-CPU container on a 32-core host');
  t.equal(availableCores(files({}), 8), 8);
  t.equal(availableCores(files({ '/sys/fs/cgroup/cpu.max': '50000 100000' }), 8), 1, 'never below 1');
});

t.test('memory budget: the setting, else 80 % of min(RAM, cgroup limit)', async (t) => {
  t.equal(memoryBudget(1234, 10_000, null), 1234);
  t.equal(memoryBudget(0, 10_000, null), 8000);
  t.equal(memoryBudget(0, 10_000, 5000), 4000);
  t.equal(
    cgroupMemoryLimit((f) => (f === '/sys/fs/cgroup/memory.max' ? 'max\n' : null)),
    null,
  );
  t.equal(
    cgroupMemoryLimit((f) => (f === '/sys/fs/cgroup/memory.max' ? '1073741824\n' : null)),
    1073741824,
  );
});

t.test('options: typed like Ollama, unknown keys ignored, stored parameters under the request', async (t) => {
  t.same(parseSamplingOptions({ temperature: 0.2, top_k: 5.7, stop: ['a'], numa: true, mirostat: 2 }), { temperature: 0.2, top_k: 5, stop: ['a'] });
  t.throws(() => parseSamplingOptions({ stop: 'x' }), { statusCode: 400, message: 'option "stop" must be of type array' });
  t.throws(() => parseSamplingOptions({ temperature: 'hot' }), { statusCode: 400, message: 'option "temperature" must be of type number' });
  t.throws(() => parseSamplingOptions({ num_predict: '5' }), { statusCode: 400, name: 'AppError' });
  t.throws(() => parseSamplingOptions([1]), { statusCode: 400, name: 'AppError' });
  t.same(parseSamplingOptions(undefined), {});
  t.same(mergeOptions({ temperature: 0.1, stop: '<|end|>', top_k: 'bad' }, { top_p: 0.5 }), { temperature: 0.1, stop: ['<|end|>'], top_p: 0.5 });
  t.same(mergeOptions({ temperature: 0.1 }, { temperature: 0.9 }), { temperature: 0.9 });
});

t.test('sampling: Ollama defaults passed explicitly, penalties and seeds mapped', async (t) => {
  const d = toLlamaSampling({}, 2048);
  t.equal(d.temperature, 0.8);
  t.equal(d.topK, 40);
  t.equal(d.topP, 0.9);
  t.equal(d.minP, 0);
  t.equal(d.repeatPenalty, false, 'no repeat penalty unless asked (Ollama >= Aug 2026, llama.cpp, OpenAI)');
  t.same(toLlamaSampling({ repeat_penalty: 1.1 }, 2048).repeatPenalty, {
    penalty: 1.1,
    lastTokens: 64,
    presencePenalty: 0,
    frequencyPenalty: 0,
    penalizeNewLine: true,
  });
  t.ok(Number.isInteger(d.seed) && d.seed >= 0, 'a random seed');
  const s = toLlamaSampling({ temperature: 0, seed: 42, repeat_last_n: -1, stop: ['x', ''], presence_penalty: 0.5 }, 512);
  t.equal(s.seed, 42);
  t.equal(s.temperature, 0);
  t.same(s.customStopTriggers, ['x']);
  t.match(s.repeatPenalty, { lastTokens: 512, presencePenalty: 0.5 });
  t.equal(toLlamaSampling({ repeat_penalty: 1 }, 512).repeatPenalty, false, 'penalty 1 and no presence/frequency = off');
  t.equal(toLlamaSampling({ repeat_last_n: 0 }, 512).repeatPenalty, false);
  t.equal(maxTokensFor({}, 2048, 48), 2000, 'num_predict unset: until the context is full');
  t.equal(maxTokensFor({ num_predict: -1 }, 2048, 48), 2000);
  t.equal(maxTokensFor({ num_predict: 16 }, 2048, 48), 16);
  t.equal(maxTokensFor({ num_predict: 5000 }, 2048, 48), 2000);
});

t.test('Go templates: families map to wrappers, simple ones render, others fall back', async (t) => {
  t.equal(goTemplateFamily('{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>{{ end }}'), 'chatml');
  t.equal(goTemplateFamily('<|start_header_id|>user<|end_header_id|>'), 'llama3');
  t.equal(goTemplateFamily('[INST] <<SYS>>{{ .System }}<</SYS>> {{ .Prompt }} [/INST]'), 'llama2');
  t.equal(goTemplateFamily('[INST] {{ .Prompt }} [/INST]'), 'mistral');
  t.equal(goTemplateFamily('<start_of_turn>user'), 'gemma');
  t.equal(goTemplateFamily('{{ .Prompt }}'), null);
  t.type(wrapperForGoTemplate('<|im_start|>'), ChatMLChatWrapper);
  t.type(wrapperForGoTemplate('<|start_header_id|>'), Llama3ChatWrapper);
  t.equal(wrapperForGoTemplate('{{ .Prompt }}'), null);

  const tpl = '{{ if .System }}SYS: {{ .System }}\n{{ end }}USER: {{ .Prompt }}\nASSISTANT:{{ .Response }} END';
  t.equal(renderGoTemplate(tpl, { System: 'be brief', Prompt: 'hi' }), 'SYS: be brief\nUSER: hi\nASSISTANT:');
  t.equal(renderGoTemplate(tpl, { Prompt: 'hi' }), 'USER: hi\nASSISTANT:');
  t.equal(renderGoTemplate('{{- if .System }}[{{ .System }}]{{ else }}[none]{{ end -}}\n  {{ .Prompt }}', { Prompt: 'p' }), '[none]p');
  t.equal(renderGoTemplate('{{ range .Messages }}{{ .Content }}{{ end }}', { Prompt: 'p' }), null);
  t.equal(renderGoTemplate('{{ if .System }}unclosed', { Prompt: 'p' }), null);
});

t.test('chat history: tool calls and their results, tools as handler-less functions', async (t) => {
  const history = toChatHistory([
    { role: 'system', content: 'sys' },
    { role: 'user', content: 'weather?' },
    { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: '{"temp": 21}', tool_name: 'get_weather' },
    { role: 'tool', content: 'orphan' },
  ]);
  t.same(history[0], { type: 'system', text: 'sys' });
  t.same(history[1], { type: 'user', text: 'weather?' });
  t.match(history[2], { type: 'model', response: [{ type: 'functionCall', name: 'get_weather', params: { city: 'Paris' }, result: { temp: 21 } }] });
  t.same(history[3], { type: 'user', text: 'orphan' }, 'a tool result without a pending call becomes user text');
  const fns = toFunctions([
    { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } },
    { type: 'function', function: { name: 'noop' } },
  ]);
  t.same(fns, { get_weather: { description: 'Weather', params: { type: 'object', properties: { city: { type: 'string' } } } }, noop: {} });
  t.match(toolCallId(), /^call_[a-z0-9]{8}$/);
  t.match(
    toToolCalls([
      { functionName: 'f', params: { a: 1 } },
      { functionName: 'g', params: undefined },
    ]),
    [{ id: /^call_/, function: { index: 0, name: 'f', arguments: { a: 1 } } }, { function: { index: 1, name: 'g', arguments: {} } }],
  );
});

t.test('memory estimate from the GGUF header grows with context and slots', async (t) => {
  const file = fixture('gguf/bench-random-135m-q4_0.gguf');
  const shape = await readShape(file);
  t.same(shape, {
    layers: 30,
    embedding: 576,
    heads: 9,
    kvHeads: 3,
    headDimK: 64,
    headDimV: 64,
    trainedContext: 2048,
    vocab: 32000,
    tensorBytes: { layers: 59_857_920, output: 10_370_304, other: 10_368_000 },
  });
  const bytes = await fileBytes(file);
  const one = estimateBytes(shape, bytes, { contextLength: 2048, parallel: 1, batchSize: 512 });
  const four = estimateBytes(shape, bytes, { contextLength: 2048, parallel: 4, batchSize: 512 });
  t.ok(one > bytes, 'more than the weights');
  // KV: 2 (K,V) × 30 layers × 2048 × 192 (576/9×3) × 2 bytes = 47 MB per sequence.
  t.equal(four - one, 3 * 2 * 30 * 2048 * 192 * 2);
  t.equal(estimateBytes(shape, bytes, { contextLength: 99999, parallel: 1, batchSize: 512 }), one, 'capped at the trained context');
});

t.test('stop sequences on the text stream: everything before, nothing from the stop on', async (t) => {
  const run = (stops: string[], pieces: string[]) => {
    let out = '';
    let stopped = 0;
    const d = new StopDetector(
      stops,
      (text) => (out += text),
      () => stopped++,
    );
    for (const p of pieces) d.push(p);
    d.flush();
    return { out, stopped };
  };
  t.same(run(['as'], [', there', ' w', 'as', ' a boy']), { out: ', there w', stopped: 1 }, 'the space before the stop is kept');
  t.same(run(['END'], ['a', 'E', 'N', 'x']), { out: 'aENx', stopped: 0 }, 'a false start is released');
  t.same(run(['END'], ['aE', 'ND b']), { out: 'a', stopped: 1 }, 'across pieces');
  t.same(run(['x', 'ab'], ['cab', 'x']), { out: 'c', stopped: 1 }, 'the earliest stop wins');
  t.same(run([], ['a', 'b']), { out: 'ab', stopped: 0 });
  t.same(run(['zz'], ['a', 'z']), { out: 'az', stopped: 0 }, 'flush releases what was held');
});
