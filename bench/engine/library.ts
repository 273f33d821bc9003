/**
 * The engine benchmark's ceiling: the runner's own generation code (`ModelSession`, the
 * node-llama-cpp calls, prefix reuse, stop detection) driven in this process, with no HTTPS, no
 * auth, no IPC. The same figures as the servers (single-stream decode and time to first token,
 * medians of 5, and aggregate tokens/s for 4 and 16 streams), timed where the tokens come out.
 * `run.ts` starts it once per repetition, with the libuv pool size a runner gets, and reads one
 * JSON line from its stdout. Whatever gap this leaves to llama-server is in node-llama-cpp (or
 * the way the runner uses it), not in the appliance's HTTP, auth or process boundary.
 *
 * Run alone: `UV_THREADPOOL_SIZE=2 node --conditions=lia-source --import tsx bench/engine/library.ts THREADS TOKENS [SLOTS CONTEXT BATCH_THREADS [MODEL_PATH]]`
 * (the model defaults to bench-random-135m-q4_0).
 *
 * @module
 */
import type { GenerationEvent } from 'lia/engine';
import { ModelSession } from '../../plugins/backend-llama-cpp/runner/session.js';
import { fixture } from '../../test/helpers/fixtures.js';
import { measureFigures, PROMPT, SAMPLING, type Stream } from './figures.js';

const [threads = 1, tokens = 128, SLOTS = 16, CONTEXT = 512, batchThreads = threads] = process.argv.slice(2, 7).map(Number);
const MODEL = process.argv[7] ?? fixture('gguf/bench-random-135m-q4_0.gguf');
const OPTIONS = { ...SAMPLING, num_predict: tokens };

const session = await ModelSession.load({
  modelPath: MODEL,
  contextLength: CONTEXT,
  parallel: SLOTS,
  threads,
  batchThreads,
  batchSize: 512,
  gpu: false,
});

async function generate(prompt = PROMPT, predict = tokens): Promise<Stream> {
  await new Promise((resolve) => setImmediate(resolve)); // as the HTTP clients settle before a request
  const t0 = performance.now();
  let first = 0;
  let last = 0;
  let count = 0;
  const emit = (e: GenerationEvent): void => {
    if (e.type === 'token') {
      last = performance.now();
      if (first === 0) first = last;
    } else if (e.type === 'done') count = e.completionTokens;
  };
  await session.generate({ prompt, raw: true, options: { ...OPTIONS, num_predict: predict } }, new AbortController().signal, emit);
  return { ttftMs: first - t0, decodeMs: last - first, tokens: count, endMs: performance.now() };
}

// Warm-up as the servers get it: every slot used once.
await Promise.all(Array.from({ length: SLOTS }, () => generate(PROMPT, 8)));
const result = await measureFigures(generate);
await session.dispose();
console.log(JSON.stringify(result));
