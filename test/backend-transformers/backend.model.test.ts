/**
 * The transformers backend on its own, on the real `onnx/tiny-random-minilm` fixture (random
 * weights, real all-MiniLM tokenizer): shapes, normalisation, batch = single calls, agreement
 * with a bare transformers.js pipeline, truncation, dimensions, dtype choice, clear errors for
 * missing files, and the embedding-only refusals. The HTTPS path is in `api.model.test.ts`.
 */
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { isAppError } from '../../core/index.js';
import type { LoadedModel } from 'lia/engine';
import type { ResolvedModel } from 'lia/model-store';
import { createTransformersBackend } from '../../plugins/backend-transformers/backend.js';
import { transformers } from '../../plugins/backend-transformers/runtime.js';
import { fixture } from '../helpers/fixtures.js';

const DIR = fixture('onnx/tiny-random-minilm');
const LOAD = { parallel: 1, threads: 1 };
const never = new AbortController().signal;

function resolved(modelPath: string, name = 'minilm:latest'): ResolvedModel {
  return {
    name,
    digest: '0'.repeat(64),
    format: 'onnx',
    modelPath,
    sizeBytes: 0,
    parameters: {},
    messages: [],
    capabilities: ['embedding'],
    details: { parent_model: '', format: 'onnx', family: 'bert', families: ['bert'], parameter_size: '', quantization_level: '' },
  };
}

const maxDiff = (a: number[], b: number[]): number => Math.max(...a.map((x, i) => Math.abs(x - b[i]!)));
const norm = (v: number[]): number => Math.hypot(...v);

/** Asserts that `promise` rejects with an AppError of `status` whose message matches `re`. */
async function rejectsWith(t: Test, promise: Promise<unknown> | (() => unknown), status: number, re: RegExp): Promise<void> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
    t.fail(`expected a ${status} error matching ${re}`);
  } catch (err) {
    t.ok(isAppError(err), `an AppError, got ${String(err)}`);
    if (isAppError(err)) {
      t.equal(err.statusCode, status);
      t.match(err.message, re);
    }
  }
}

const TEXTS = [
  'The quick brown fox jumps over the lazy dog.',
  'hello',
  'Embeddings turn sentences into vectors; similar sentences get similar vectors, or so we hope.',
  'naïve café — ünïcödé and emoji 🚀 survive tokenisation',
];

const backend = createTransformersBackend({ dtype: 'auto', threads: 0, maxBatchTokens: 4096, memoryArena: true });
let model: LoadedModel;

t.before(async () => {
  model = await backend.load(resolved(DIR), LOAD);
});
t.teardown(() => model.unload());

t.test('loaded model: embedding only, 512-token context, a size', async (t) => {
  t.same(model.capabilities, ['embedding']);
  t.equal(model.contextLength, 512);
  t.ok(model.sizeBytes > 4_000_000, 'at least the fp32 weights');
  t.equal(model.vramBytes, 0);
  const estimate = await backend.estimateMemory(resolved(DIR), LOAD);
  t.equal(estimate.totalBytes, model.sizeBytes, 'the estimate is what the loaded model reports');
  t.equal(estimate.vramBytes, 0);
});

t.test('vectors are 32-dim, unit length, batch = single calls', async (t) => {
  const batch = await model.embed({ inputs: TEXTS, truncate: true }, never);
  t.equal(batch.embeddings.length, TEXTS.length);
  for (const v of batch.embeddings) {
    t.equal(v.length, 32);
    t.ok(Math.abs(norm(v) - 1) < 1e-5, `norm ${norm(v)}`);
  }
  let tokens = 0;
  for (const [i, text] of TEXTS.entries()) {
    const one = await model.embed({ inputs: [text], truncate: true }, never);
    tokens += one.promptTokens;
    t.ok(maxDiff(one.embeddings[0]!, batch.embeddings[i]!) < 1e-5, `input ${i} alone = in the batch`);
  }
  t.equal(batch.promptTokens, tokens, 'prompt tokens add up');
  const hello = await model.embed({ inputs: ['hello'], truncate: true }, never);
  t.equal(hello.promptTokens, 3, '[CLS] hello [SEP]');
  t.ok(maxDiff(batch.embeddings[0]!, batch.embeddings[2]!) > 1e-3, 'different texts, different vectors');
});

t.test('same vectors as a bare transformers.js feature-extraction pipeline', async (t) => {
  const { pipeline } = await transformers();
  const extractor = await pipeline('feature-extraction', DIR, { dtype: 'fp32', local_files_only: true });
  t.teardown(() => extractor.dispose());
  const expected = (await extractor(TEXTS, { pooling: 'mean', normalize: true })).tolist() as number[][];
  const ours = await model.embed({ inputs: TEXTS, truncate: true }, never);
  for (const [i, v] of ours.embeddings.entries()) t.ok(maxDiff(v, expected[i]!) < 1e-5, `input ${i}`);
});

t.test('a request split into several passes (no memory arena) gives the same vectors', async (t) => {
  const small = createTransformersBackend({ dtype: 'auto', threads: 1, maxBatchTokens: 512, memoryArena: false });
  const split = await small.load(resolved(DIR), LOAD);
  t.teardown(() => split.unload());
  const inputs = Array.from({ length: 40 }, (_, i) => `${'sentence number '.repeat(1 + (i % 7))}${i}`);
  const whole = await model.embed({ inputs, truncate: true }, never);
  const parts = await split.embed({ inputs, truncate: true }, never);
  t.equal(parts.promptTokens, whole.promptTokens);
  for (const [i, v] of parts.embeddings.entries()) t.ok(maxDiff(v, whole.embeddings[i]!) < 1e-5, `input ${i}`);
});

t.test("truncate: true cuts at 512 tokens; false rejects with Ollama's 400", async (t) => {
  const long = 'word '.repeat(700);
  const cut = await model.embed({ inputs: [long, 'short'], truncate: true }, never);
  t.equal(cut.embeddings.length, 2);
  t.equal(cut.promptTokens, 512 + 3);
  const exact = 'word '.repeat(510).trim(); // 510 words + [CLS] + [SEP] = 512 tokens: fits
  t.equal((await model.embed({ inputs: [exact], truncate: false }, never)).promptTokens, 512);
  const refused = model.embed({ inputs: ['short', long], truncate: false }, never);
  await rejectsWith(t, refused, 400, /^the input length exceeds the context length$/);
});

t.test('dimensions keeps the first N values, re-normalised', async (t) => {
  const [full] = (await model.embed({ inputs: [TEXTS[0]!], truncate: true }, never)).embeddings;
  const [cut] = (await model.embed({ inputs: [TEXTS[0]!], truncate: true, dimensions: 8 }, never)).embeddings;
  t.equal(cut!.length, 8);
  t.ok(Math.abs(norm(cut!) - 1) < 1e-5);
  const head = full!.slice(0, 8);
  const n = norm(head);
  t.ok(
    maxDiff(
      cut!,
      head.map((x) => x / n),
    ) < 1e-5,
  );
  const [wide] = (await model.embed({ inputs: [TEXTS[0]!], truncate: true, dimensions: 64 }, never)).embeddings;
  t.equal(wide!.length, 32, 'asking for more than the width returns the whole vector');
});

t.test('normalize: false gives the raw mean (legacy /api/embeddings), same direction', async (t) => {
  const [unit] = (await model.embed({ inputs: [TEXTS[2]!], truncate: true }, never)).embeddings;
  const params = { inputs: [TEXTS[2]!], truncate: true, normalize: false };
  const [raw] = (await model.embed(params, never)).embeddings;
  t.equal(raw!.length, 32);
  t.ok(Math.abs(norm(raw!) - 1) > 1e-3, `not unit length (norm ${norm(raw!)})`);
  t.ok(
    maxDiff(
      raw!.map((x) => x / norm(raw!)),
      unit!,
    ) < 1e-5,
    'normalising it gives the /api/embed vector',
  );
});

t.test('empty input list, aborted signal', async (t) => {
  t.same(await model.embed({ inputs: [], truncate: true }, never), { embeddings: [], promptTokens: 0 });
  const ac = new AbortController();
  ac.abort();
  await t.rejects(model.embed({ inputs: ['x'], truncate: true }, ac.signal), { name: 'AbortError' });
});

t.test('generate and chat refuse at once, as Ollama words it', async (t) => {
  const options = {};
  const messages = [{ role: 'user' as const, content: 'hi' }];
  const generate = () => model.generate({ prompt: 'hi', raw: false, options }, never);
  await rejectsWith(t, generate, 400, /^"minilm:latest" does not support generate$/);
  await rejectsWith(t, () => model.chat({ messages, options }, never), 400, /^"minilm:latest" does not support chat$/);
});

t.test('dtype: auto takes fp32, q8 takes the quantized file', async (t) => {
  const q8Backend = createTransformersBackend({ dtype: 'q8', threads: 1, maxBatchTokens: 4096, memoryArena: true });
  const q8 = await q8Backend.load(resolved(DIR), LOAD);
  t.teardown(() => q8.unload());
  t.ok(q8.sizeBytes < model.sizeBytes, 'the quantized weights are smaller');
  const [a] = (await model.embed({ inputs: [TEXTS[0]!], truncate: true }, never)).embeddings;
  const [b] = (await q8.embed({ inputs: [TEXTS[0]!], truncate: true }, never)).embeddings;
  t.equal(b!.length, 32);
  t.ok(Math.abs(norm(b!) - 1) < 1e-5);
  t.ok(maxDiff(a!, b!) > 0, 'a different weights file ran');
  await rejectsWith(
    t,
    createTransformersBackend({ dtype: 'fp16', threads: 1, maxBatchTokens: 4096, memoryArena: true }).load(resolved(DIR), LOAD),
    500,
    /model "minilm:latest" cannot be loaded: its folder has no onnx\/model_fp16\.onnx/,
  );
});

t.test('sentence-transformers pooling config: cls is honoured, unsupported modes are refused', async (t) => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'lia-onnx-pool-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  const withPooling = async (name: string, modes: Record<string, boolean>, modules?: unknown): Promise<string> => {
    const dir = path.join(tmp, name);
    await cp(DIR, dir, { recursive: true, filter: (src) => !src.endsWith('.onnx') });
    await symlink(path.join(DIR, 'onnx', 'model.onnx'), path.join(dir, 'onnx', 'model.onnx'));
    const folder = modules ? 'pool' : '1_Pooling';
    await mkdir(path.join(dir, folder));
    await writeFile(path.join(dir, folder, 'config.json'), JSON.stringify({ word_embedding_dimension: 32, ...modes }));
    if (modules) await writeFile(path.join(dir, 'modules.json'), JSON.stringify(modules));
    return dir;
  };
  const clsDir = await withPooling('cls', { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false });
  const cls = await backend.load(resolved(clsDir), LOAD);
  t.teardown(() => cls.unload());
  const { pipeline } = await transformers();
  const extractor = await pipeline('feature-extraction', DIR, { dtype: 'fp32', local_files_only: true });
  t.teardown(() => extractor.dispose());
  const expected = (await extractor(TEXTS, { pooling: 'cls', normalize: true })).tolist() as number[][];
  const ours = await cls.embed({ inputs: TEXTS, truncate: true }, never);
  for (const [i, v] of ours.embeddings.entries()) t.ok(maxDiff(v, expected[i]!) < 1e-5, `cls input ${i} = pipeline pooling 'cls'`);
  const modules = [{ idx: 1, name: '1', path: 'pool', type: 'sentence_transformers.models.Pooling' }];
  await rejectsWith(
    t,
    backend.load(resolved(await withPooling('max', { pooling_mode_max_tokens: true }, modules), 'maxed'), LOAD),
    500,
    /^model "maxed" asks for max_tokens pooling \(pool\/config\.json\); this backend runs mean, cls or lasttoken pooling$/,
  );
});

t.test('missing files are clear errors naming them; nothing is fetched', async (t) => {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'lia-onnx-'));
  t.teardown(() => rm(tmp, { recursive: true, force: true }));
  // Any attempt to reach a hub goes through env.fetch: record it.
  const { env } = await transformers();
  const fetched: string[] = [];
  const realFetch = env.fetch;
  env.fetch = async (input: string | URL) => {
    fetched.push(String(input));
    throw new Error('network access in a test');
  };
  t.teardown(() => {
    env.fetch = realFetch;
  });
  // A folder with everything but the weights.
  const noWeights = path.join(tmp, 'no-weights');
  await cp(DIR, noWeights, { recursive: true, filter: (src) => !src.endsWith('.onnx') });
  await rejectsWith(
    t,
    backend.load(resolved(noWeights, 'broken'), LOAD),
    500,
    /"broken" cannot be loaded: its folder has no onnx\/model\.onnx or onnx\/model_quantized\.onnx/,
  );
  await rejectsWith(t, backend.estimateMemory(resolved(noWeights, 'broken'), LOAD), 500, /onnx\/model\.onnx/);
  // A folder without its tokenizer (the weights linked in).
  const noTokenizer = path.join(tmp, 'no-tokenizer');
  await cp(DIR, noTokenizer, { recursive: true, filter: (src) => !src.endsWith('tokenizer.json') && !src.endsWith('.onnx') });
  await symlink(path.join(DIR, 'onnx', 'model.onnx'), path.join(noTokenizer, 'onnx', 'model.onnx'));
  await rejectsWith(t, backend.load(resolved(noTokenizer, 'broken'), LOAD), 500, /its folder has no tokenizer\.json$/);
  // A corrupt weights file: the runtime's error, without the server's path.
  const corrupt = path.join(tmp, 'corrupt');
  await cp(noWeights, corrupt, { recursive: true });
  await cp(path.join(DIR, 'config.json'), path.join(corrupt, 'onnx', 'model.onnx'));
  try {
    await backend.load(resolved(corrupt, 'corrupt'), LOAD);
    t.fail('a corrupt model loaded');
  } catch (err) {
    t.ok(isAppError(err) && err.statusCode === 500, String(err));
    t.match((err as Error).message, /^model "corrupt" cannot be loaded: /);
    t.notMatch((err as Error).message, tmp, 'no server path in the message');
  }
  t.same(fetched, [], 'nothing was fetched');
});

t.test('unload is idempotent and later requests are refused', async (t) => {
  const m = await backend.load(resolved(DIR, 'gone'), LOAD);
  const inFlight = m.embed({ inputs: TEXTS, truncate: true }, never);
  const unloading = m.unload();
  t.equal((await inFlight).embeddings.length, TEXTS.length, 'the request in flight completes');
  await unloading;
  await m.unload();
  await rejectsWith(t, m.embed({ inputs: ['x'], truncate: true }, never), 503, /"gone" is being unloaded/);
});
