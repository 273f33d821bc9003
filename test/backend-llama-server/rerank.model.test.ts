/**
 * Rerankers on backend-llama-server over real HTTPS: with the llama-server binary built (`lia engine
 * build`), a GGUF reranker is ranked by a `llama-server --rerank` process without any `backends`
 * setting, with the same scores and order as node-llama-cpp gives for the same file (a second
 * model of the same weights that a `backends` entry keeps on node-llama-cpp), in the shape
 * docs/rerank.md gives; its tokenizer answers `/tokenize` as node-llama-cpp's does. Without a
 * built binary (an empty cache folder: a fresh install) the reranker ranks on node-llama-cpp.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import type { LlamaServerBackend } from '../../plugins/backend-llama-server/backend.js';
import { startTestAppliance, type TestAppliance } from '../helpers/appliance.js';
import { createModel } from '../helpers/models.js';
import { post, rerankFixtures } from '../rerank/setup.js';
import { requireLlamaServer } from '../helpers/engines.js';

requireLlamaServer();

const QUERY = 'what do cats eat';
const DOCS = [
  'Cats are carnivores and eat meat.',
  'The stock market fell sharply on Monday.',
  'what do cats eat',
  'Paris is the capital of France.',
  'Kittens drink milk and later eat fish.',
  'A recipe for bread with flour and water.',
];
const PLUGINS = { 'host-network': false, 'host-gpu': false, 'host-services': false, 'backend-transformers': false, webui: false } as const;

const fixtures = await rerankFixtures();

async function appliance(env: Record<string, string> = {}): Promise<TestAppliance> {
  const app = await startTestAppliance({ plugins: { ...PLUGINS }, env: { LIA_THREADS: '1', ...env } });
  try {
    await createModel(app, 'reranker', fixtures.gguf);
    await createModel(app, 'reranker-cpp', fixtures.gguf);
  } catch (err) {
    await app.close();
    throw err;
  }
  return app;
}

const serverOf = (app: TestAppliance) =>
  app.hooks.extensions
    .get('backends')
    .list()
    .find((b) => b.name === 'llama-server') as LlamaServerBackend;
const pidOf = (app: TestAppliance, model: string) =>
  serverOf(app)
    .processes()
    .find((p) => p.model === `${model}:latest`)?.pid;

type Result = { index: number; relevance_score: number; document?: { text: string } };

/** `/v1/rerank` of the test's query and documents on `model`: the results, checked for docs/rerank.md's shape. */
async function rank(t: Test, app: TestAppliance, model: string): Promise<Result[]> {
  const res = await post(app, '/v1/rerank', { model, query: QUERY, documents: DOCS });
  t.equal(res.status, 200, JSON.stringify(res.json));
  t.equal(res.json.model, `${model}:latest`);
  t.equal(res.json.object, 'list');
  const results = res.json.results as Result[];
  t.same(results.map((r) => r.index).sort(), [0, 1, 2, 3, 4, 5], `${model}: every document once`);
  for (const r of results) {
    t.ok(r.relevance_score > 0 && r.relevance_score < 1, `${model}: document ${r.index} scores a probability (${r.relevance_score})`);
    t.same(r.document, { text: DOCS[r.index] }, `${model}: the document comes back`);
  }
  const scores = results.map((r) => r.relevance_score);
  t.same(
    scores,
    [...scores].sort((a, b) => b - a),
    `${model}: best first`,
  );
  t.ok(res.json.usage.prompt_tokens > DOCS.length * 3, `${model}: usage counts the pairs (${res.json.usage.prompt_tokens})`);
  return results;
}

t.test('with the binary built, a reranker ranks on llama-server as node-llama-cpp does', async (t) => {
  const app = await appliance({ LIA_BACKENDS: 'reranker-cpp:latest=llama-cpp' });
  t.teardown(() => app.close());

  const served = await rank(t, app, 'reranker');
  const pid = pidOf(app, 'reranker');
  t.ok(pid, 'a llama-server process serves the reranker');
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  t.ok(args[0]?.endsWith('llama-server') && args.includes('--rerank'), `started with --rerank (${args.slice(0, 1).join(' ')})`);

  const reference = await rank(t, app, 'reranker-cpp');
  t.notOk(pidOf(app, 'reranker-cpp'), 'the model a backends entry gives node-llama-cpp stays there');
  t.same(
    served.map((r) => r.index),
    reference.map((r) => r.index),
    'the same order as node-llama-cpp',
  );
  const expected = new Map(reference.map((r) => [r.index, r.relevance_score]));
  for (const r of served) {
    const want = expected.get(r.index)!;
    t.ok(Math.abs(r.relevance_score - want) < 1e-4, `document ${r.index}: ${r.relevance_score} ≈ ${want} (the sigmoid of llama-server's logit)`);
  }

  const top = await post(app, '/v1/rerank', { model: 'reranker', query: QUERY, documents: DOCS.map((text) => ({ text })), top_n: 2, return_documents: false });
  t.equal(top.status, 200);
  t.same(
    top.json.results.map((r: Result) => r.index),
    served.slice(0, 2).map((r) => r.index),
    'top_n keeps the best two',
  );
  t.notOk('document' in top.json.results[0], 'return_documents: false');
  const v2 = await post(app, '/v2/rerank', { model: 'reranker', query: QUERY, documents: DOCS });
  t.same(
    v2.json.results,
    served.map(({ index, relevance_score }) => ({ index, relevance_score })),
    '/v2/rerank answers the same scores',
  );

  const long = 'cats '.repeat(2000);
  for (const model of ['reranker', 'reranker-cpp']) {
    const cut = await post(app, '/v1/rerank', { model, query: QUERY, documents: [long, 'short'] });
    t.equal(cut.status, 200, `${model}: a document past the context is cut, not refused (${JSON.stringify(cut.json).slice(0, 200)})`);
    t.ok(cut.json.usage?.prompt_tokens <= 2 * 512, `${model}: at most the context per pair (${cut.json.usage?.prompt_tokens})`);
  }
  const megabyte = 'cats and dogs '.repeat(75_000);
  for (const model of ['reranker', 'reranker-cpp']) {
    const refused = await post(app, '/v1/rerank', { model, query: QUERY, documents: ['short', megabyte], truncate: false });
    t.equal(refused.status, 400, `${model}: truncate false and a 1 MB document is a 400`);
    t.match(refused.json, { error: { type: 'invalid_request_error', message: /documents\[1\] and the query take \d+ tokens, more than the context/ } });
  }
  const strict = await post(app, '/v1/rerank', { model: 'reranker', query: 'cats '.repeat(600), documents: ['short'] });
  t.equal(strict.status, 400, 'a query that leaves no room for a document is a 400');
  t.match(strict.json, { error: { type: 'invalid_request_error', message: /query is longer than the context/ } });

  for (const body of [{ content: 'Hello world, tokenization!', add_special: true, with_pieces: true }, { content: 'Hello world, tokenization!' }]) {
    const a = await post(app, '/tokenize', { model: 'reranker', ...body });
    const b = await post(app, '/tokenize', { model: 'reranker-cpp', ...body });
    t.equal(a.status, 200, JSON.stringify(a.json));
    // Pieces are each engine's text of the token: llama.cpp writes a WordPiece token that starts
    // a word with its space (" ,"), node-llama-cpp without it.
    const trimmed = (tokens: Array<number | { id: number; piece: string }>) =>
      tokens.map((x) => (typeof x === 'number' ? x : { id: x.id, piece: x.piece.trim() }));
    t.same(trimmed(a.json.tokens), trimmed(b.json.tokens), `/tokenize ${JSON.stringify(body)}: llama-server's tokenizer gives node-llama-cpp's ids`);
  }
  const ids = (await post(app, '/tokenize', { model: 'reranker', content: 'hello world' })).json.tokens as number[];
  const back = await post(app, '/detokenize', { model: 'reranker', tokens: ids });
  t.equal(back.json.content.trim(), 'hello world', '/detokenize');
  const bad = await post(app, '/detokenize', { model: 'reranker', tokens: [1_000_000] });
  t.match([bad.status, bad.json.error], [400, /not a token of this model/], 'an id past the vocabulary is a 400');
  t.ok(pidOf(app, 'reranker'), 'the reranker is still served');
});

t.test('without a built binary (a fresh install), the reranker ranks on node-llama-cpp', async (t) => {
  const empty = await mkdtemp(path.join(os.tmpdir(), 'lia-no-server-'));
  t.teardown(() => rm(empty, { recursive: true, force: true }));
  const app = await appliance({ LIA_CACHE_DIR: empty });
  t.teardown(() => app.close());
  const results = await rank(t, app, 'reranker');
  t.same(serverOf(app).processes(), [], 'no llama-server process was started');
  const ps = (await (await app.fetch('/api/ps')).json()) as { models: Array<{ name: string }> };
  t.ok(
    ps.models.some((m) => m.name === 'reranker:latest'),
    'the model is loaded (on node-llama-cpp)',
  );
  t.equal(results.length, DOCS.length);
});
