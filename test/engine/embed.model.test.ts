/**
 * `/api/embed`, the legacy `/api/embeddings`, `/api/ps` and `/api/version` end to end with the
 * official `ollama` client: normalised batch embeddings, `dimensions`, `truncate`, raw legacy
 * vectors, and the loaded-model listing with its sizes, expiry and context length. On llama-server
 * a generation model embeds through a second server on its weights.
 */
import t from 'tap';
import { VERSION } from '../../core/version.js';
import { OLLAMA_COMPAT_VERSION } from '../../plugins/engine/routes/ps.js';
import { engineDifference } from '../helpers/engines.js';
import { createModel } from '../helpers/models.js';
import { ollamaClient, startEngineAppliance } from './helpers.js';

const app = await startEngineAppliance();
t.teardown(() => app.close());
await createModel(app, 'stories', 'gguf/stories260K.gguf');
const ollama = ollamaClient(app);
const norm = (v: number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
/** Whether two vectors are the same up to float rounding (llama-server evaluates in batches of varying shape). */
const close = (a: number[] | undefined, b: number[] | undefined) => !!a && !!b && a.length === b.length && a.every((x, i) => Math.abs(x - b[i]!) < 1e-5);

t.test('embed: one vector per input, L2-normalised, deterministic', async (t) => {
  const r = await ollama.embed({ model: 'stories', input: ['Once upon a time', 'The cat sat.', 'Once upon a time'] });
  t.equal(r.model, 'stories');
  t.equal(r.embeddings.length, 3);
  for (const v of r.embeddings) {
    t.equal(v.length, 64, 'the model width');
    t.ok(Math.abs(norm(v) - 1) < 1e-5, 'unit length');
  }
  t.ok(close(r.embeddings[0], r.embeddings[2]), 'same input, same vector');
  t.notSame(r.embeddings[0], r.embeddings[1]);
  t.ok(r.prompt_eval_count >= 8, 'input tokens are counted');
  t.ok(r.total_duration > 0);

  const single = await ollama.embed({ model: 'stories', input: 'Once upon a time' });
  t.equal(single.embeddings.length, 1, 'a string input is one vector');
  t.ok(close(single.embeddings[0], r.embeddings[0]), 'the same as in a batch');
});

t.test('dimensions cut and re-normalise; truncate:false on a too-long input is a 400', async (t) => {
  const full = await ollama.embed({ model: 'stories', input: 'Once upon a time' });
  const cut = await ollama.embed({ model: 'stories', input: 'Once upon a time', dimensions: 16 });
  const v = cut.embeddings[0] as number[];
  t.equal(v.length, 16);
  t.ok(Math.abs(norm(v) - 1) < 1e-5);
  const head = (full.embeddings[0] as number[]).slice(0, 16);
  t.ok(Math.abs(v[0]! - head[0]! / norm(head)) < 1e-5, 'the first 16 dimensions, re-normalised');

  // A model whose stored num_ctx is 128 tokens (the parameter reaches the runner's context).
  await createModel(app, 'short', 'gguf/stories260K.gguf', { parameters: { num_ctx: 128 } });
  const long = 'the cat sat on the mat and '.repeat(40);
  const truncated = await ollama.embed({ model: 'short', input: long });
  t.equal(truncated.embeddings[0]?.length, 64, 'truncated by default');
  // llama-server's context is a whole number of 256-token blocks: 128 asked is 256 loaded.
  const context = engineDifference('The context loaded', { 'llama-cpp': 128, 'llama-server': 256 });
  t.ok(truncated.prompt_eval_count <= context, `at most the context: ${truncated.prompt_eval_count}`);
  t.match(
    (await ollama.ps()).models.find((m) => m.name === 'short:latest'),
    { context_length: context },
  );
  const res = await app.fetch('/api/embed', { method: 'POST', body: JSON.stringify({ model: 'short', input: long, truncate: false }) });
  t.equal(res.status, 400);
  t.same(await res.json(), { error: 'the input length exceeds the context length' });
});

t.test('legacy /api/embeddings returns one raw (not normalised) vector', async (t) => {
  const r = await ollama.embeddings({ model: 'stories', prompt: 'Once upon a time' });
  t.equal(r.embedding.length, 64);
  t.ok(Math.abs(norm(r.embedding) - 1) > 1e-3, 'not normalised');
  const normalised = await ollama.embed({ model: 'stories', input: 'Once upon a time' });
  const n = norm(r.embedding);
  t.ok(Math.abs(r.embedding[0]! / n - normalised.embeddings[0]![0]!) < 1e-5, 'the same direction as /api/embed');
  const empty = await app.fetch('/api/embeddings', { method: 'POST', body: JSON.stringify({ model: 'stories', prompt: '' }) });
  t.same(await empty.json(), { embedding: [] });
});

t.test('bad embed requests are 4xx', async (t) => {
  const cases: [unknown, number, RegExp][] = [
    [{ model: 'stories', input: 5 }, 400, /invalid input type/],
    [{ model: 'stories', input: ['a', 3] }, 400, /invalid input type/],
    [{ model: 'stories', input: 'a', dimensions: 0 }, 400, /dimensions/],
    [{ model: 'ghost', input: 'a' }, 404, /not found/],
    [{ input: 'a' }, 400, /model is required/],
  ];
  for (const [body, status, message] of cases) {
    const res = await app.fetch('/api/embed', { method: 'POST', body: JSON.stringify(body) });
    t.equal(res.status, status, JSON.stringify(body));
    t.match(await res.json(), { error: message });
  }
  const empty = await app.fetch('/api/embed', { method: 'POST', body: JSON.stringify({ model: 'stories', input: [] }) });
  t.match(await empty.json(), { model: 'stories', embeddings: [] }, 'an empty input only loads');
});

t.test('ps lists the loaded model; keep_alive sets its expiry; version answers', async (t) => {
  await ollama.generate({ model: 'short', prompt: '', keep_alive: 0 });
  await ollama.generate({ model: 'stories', prompt: 'Hi', keep_alive: '1h', options: { num_predict: 1 } });
  const ps = await ollama.ps();
  t.equal(ps.models.length, 1);
  const m = ps.models[0]!;
  t.match(m, { name: 'stories:latest', model: 'stories:latest', digest: /^[0-9a-f]{64}$/, size_vram: 0, context_length: 2048 });
  t.ok(m.size > 1_000_000, `size counts weights and caches: ${m.size}`);
  t.match(m.details, { format: 'gguf' });
  const ttl = new Date(m.expires_at).getTime() - Date.now();
  t.ok(ttl > 55 * 60_000 && ttl <= 60 * 60_000, `expires in about an hour (${ttl} ms)`);

  await ollama.generate({ model: 'stories', prompt: 'Hi', keep_alive: -1, options: { num_predict: 1 } });
  const forever = (await ollama.ps()).models[0]!;
  t.ok(new Date(forever.expires_at).getFullYear() > 2200, 'negative keep_alive: forever');

  const v = await ollama.version();
  t.equal(v.version, OLLAMA_COMPAT_VERSION, 'the Ollama API level served');
  t.equal((v as { lia_version?: string }).lia_version, VERSION, "and LIA's own version");
  const head = await app.fetch('/api/version', { method: 'HEAD' });
  t.equal(head.status, 200);
});
