/**
 * Reranking end to end over real HTTPS: a GGUF reranker (`llama-server --rerank` when its binary
 * is built, else node-llama-cpp's ranking context in a runner; docs/backends.md) and an ONNX
 * cross-encoder (transformers.js), both built by `npm run fixtures`, through `/v1/rerank`,
 * `/rerank` and `/v2/rerank`. The scores are checked against each library run
 * directly on the same files, so the whole path (route, engine, scheduler, backend, IPC) must
 * carry them unchanged and in the right order. Models that cannot rank, bad bodies, missing
 * keys, scopes and the key's model allow-list get their 4xx in OpenAI's error shape.
 */
import { getLlama, LlamaLogLevel } from 'node-llama-cpp';
import t from 'tap';
import { post, rerankAppliance } from './setup.js';

const app = await rerankAppliance();
t.teardown(() => app.close());

const QUERY = 'what do cats eat';
const DOCS = [
  'Cats are carnivores and eat meat.',
  'The stock market fell sharply on Monday.',
  'what do cats eat',
  'Paris is the capital of France.',
  'Cats are carnivores and eat meat.',
];

/** Scores from node-llama-cpp's ranking context on the GGUF file, in the test's own process. */
async function ggufReference(): Promise<number[]> {
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: app.fixtures.gguf });
  try {
    const ctx = await model.createRankingContext({ contextSize: 512, batchSize: 512 });
    return await ctx.rankAll(QUERY, DOCS);
  } finally {
    await model.dispose();
  }
}

/** Scores from transformers.js on the ONNX folder: the sigmoid of the classifier's logit per pair. */
async function onnxReference(): Promise<number[]> {
  const tf = await import('@huggingface/transformers');
  tf.env.allowRemoteModels = false;
  const options = { local_files_only: true } as const;
  const tokenizer = await tf.AutoTokenizer.from_pretrained(app.fixtures.onnx, options);
  const model = await tf.AutoModelForSequenceClassification.from_pretrained(app.fixtures.onnx, { ...options, dtype: 'fp32', device: 'cpu' });
  try {
    const inputs = tokenizer(new Array<string>(DOCS.length).fill(QUERY), { text_pair: DOCS, padding: true, truncation: true });
    const { logits } = (await model(inputs)) as { logits: { data: Float32Array } };
    return Array.from(logits.data, (x) => 1 / (1 + Math.exp(-x)));
  } finally {
    await model.dispose();
  }
}

for (const [name, reference] of [
  ['reranker', ggufReference],
  ['cross', onnxReference],
] as const) {
  t.test(`${name}: /v1/rerank scores as the library does, best first`, async (t) => {
    const expected = await reference();
    const res = await post(app, '/v1/rerank', { model: name, query: QUERY, documents: DOCS });
    t.equal(res.status, 200, JSON.stringify(res.json));
    const body = res.json;
    t.equal(body.model, `${name}:latest`);
    t.equal(body.object, 'list');
    t.match(body.id, /^rerank-/);
    t.equal(body.results.length, DOCS.length);
    t.same(body.results.map((r: { index: number }) => r.index).sort(), [0, 1, 2, 3, 4], 'every document once');
    for (const r of body.results) {
      t.ok(Math.abs(r.relevance_score - expected[r.index]!) < 1e-5, `document ${r.index}: ${r.relevance_score} ≈ ${expected[r.index]}`);
      t.same(r.document, { text: DOCS[r.index] }, 'the document comes back by default');
    }
    const scores = body.results.map((r: { relevance_score: number }) => r.relevance_score);
    t.same(
      scores,
      [...scores].sort((a, b) => b - a),
      'sorted by relevance, highest first',
    );
    const byIndex = new Map<number, number>(body.results.map((r: { index: number; relevance_score: number }) => [r.index, r.relevance_score]));
    // Within float rounding: llama-server evaluates the pairs together, and where a pair sits in
    // the batch moves the last bits.
    t.ok(Math.abs(byIndex.get(0)! - byIndex.get(4)!) < 1e-6, `the same document scores the same wherever it stands (${byIndex.get(0)}, ${byIndex.get(4)})`);
    t.ok(new Set(scores).size >= 3, 'different documents score differently');
    t.ok(body.usage.prompt_tokens > DOCS.length * 3, 'usage counts the pairs');
    t.equal(body.usage.total_tokens, body.usage.prompt_tokens);

    const top = await post(app, '/v1/rerank', {
      model: name,
      query: QUERY,
      documents: DOCS.map((text) => ({ text, id: 'x' })),
      top_n: 2,
      return_documents: false,
    });
    t.equal(top.status, 200);
    t.same(
      top.json.results.map((r: { index: number }) => r.index),
      body.results.slice(0, 2).map((r: { index: number }) => r.index),
      'top_n keeps the best two; object documents score as their text',
    );
    t.notOk('document' in top.json.results[0], 'return_documents: false');

    const empty = await post(app, '/v1/rerank', { model: name, query: QUERY, documents: [] });
    t.same([empty.status, empty.json.results], [200, []], 'no documents, no results');
  });
}

t.test('/rerank and /v2/rerank answer the same; v2 lists no documents unless asked', async (t) => {
  const v1 = await post(app, '/v1/rerank', { model: 'cross', query: QUERY, documents: DOCS.slice(0, 3) });
  const root = await post(app, '/rerank', { model: 'cross', query: QUERY, documents: DOCS.slice(0, 3) });
  const v2 = await post(app, '/v2/rerank', { model: 'cross', query: QUERY, documents: DOCS.slice(0, 3) });
  t.same(root.json.results, v1.json.results);
  t.same(
    v2.json.results,
    v1.json.results.map(({ index, relevance_score }: { index: number; relevance_score: number }) => ({ index, relevance_score })),
  );
  const fields = await post(app, '/v1/rerank', {
    model: 'cross',
    query: QUERY,
    documents: [{ title: 'Cats', body: 'They eat meat.' }],
    rank_fields: ['title', 'body'],
  });
  t.equal(fields.status, 200, 'rank_fields names the fields of object documents');
  t.same(fields.json.results[0].document, { title: 'Cats', body: 'They eat meat.' }, 'the object comes back as sent');
});

t.test('long documents are cut to the context; the capability decides who ranks', async (t) => {
  const long = 'cats '.repeat(2000);
  for (const model of ['reranker', 'cross']) {
    const res = await post(app, '/v1/rerank', { model, query: QUERY, documents: [long, 'short'] });
    t.equal(res.status, 200, `${model}: a document past the context is cut, not refused`);
    t.ok(res.json.usage.prompt_tokens <= 2 * 512, `${model}: at most the context per pair`);
  }
  for (const model of ['stories', 'minilm']) {
    const res = await post(app, '/v1/rerank', { model, query: QUERY, documents: DOCS });
    t.equal(res.status, 400, `${model} cannot rank`);
    t.match(res.json, { error: { type: 'invalid_request_error', param: 'model', message: /does not support rerank.*"rerank" capability/ } });
  }
  const root = await post(app, '/rerank', { model: 'stories', query: QUERY, documents: DOCS });
  t.match(root.json, { error: { message: /does not support rerank/ } }, '/rerank errors in the same shape');
  const show = await post(app, '/api/show', { model: 'stories' });
  t.notOk(show.json.capabilities.includes('rerank'));
  for (const model of ['reranker', 'cross'])
    t.same((await post(app, '/api/show', { model })).json.capabilities, ['rerank'], `${model}: /api/show lists rerank`);

  const chat = await post(app, '/api/chat', { model: 'reranker', messages: [{ role: 'user', content: 'hi' }], stream: false });
  t.equal(chat.status, 400, 'a reranker does not chat');
  const embed = await post(app, '/api/embed', { model: 'cross', input: 'hi' });
  t.match([embed.status, embed.json.error], [400, /does not support embedding/], 'a reranker does not embed');
});

t.test('bad requests are 400s naming the field; unknown models 404', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ model: 'cross', documents: ['a'] }, /query/],
    [{ model: 'cross', query: 'q' }, /documents/],
    [{ model: 'cross', query: 'q', documents: 'a' }, /documents/],
    [{ model: 'cross', query: 'q', documents: [1] }, /documents/],
    [{ model: 'cross', query: 'q', documents: ['a'], top_n: 0 }, /top_n/],
    [{ model: 'cross', query: 'q', documents: [{ title: 'no text' }] }, /documents\[0\]/],
    [{ query: 'q', documents: ['a'] }, /model/],
  ];
  for (const [body, field] of cases) {
    const res = await post(app, '/v1/rerank', body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.match(res.json.error.param ?? res.json.error.message, field, `names ${field}`);
  }
  const missing = await post(app, '/v1/rerank', { model: 'nope', query: 'q', documents: ['a'] });
  t.match([missing.status, missing.json.error.code], [404, 'model_not_found']);
});

t.test('keys: none is a 401, scope inference, and the allow-list holds', async (t) => {
  const anon = await app.fetch('/v1/rerank', {
    method: 'POST',
    auth: false,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'cross', query: 'q', documents: ['a'] }),
  });
  t.equal(anon.status, 401);
  const make = async (body: object) => {
    const res = await post(app, '/system/api-keys', body);
    t.equal(res.status, 201, JSON.stringify(res.json));
    return { authorization: `Bearer ${res.json.key as string}` };
  };
  const limited = await make({ name: 'rag-bot', scopes: ['inference'], models: ['cross'] });
  t.equal((await post(app, '/v1/rerank', { model: 'cross', query: 'q', documents: ['a'] }, limited)).status, 200, 'its model');
  const other = await post(app, '/v1/rerank', { model: 'reranker', query: 'q', documents: ['a'] }, limited);
  t.match([other.status, other.json.error.message], [403, /may not use the model "reranker"/], 'another model: 403');
  const reader = await make({ name: 'reader', scopes: ['models:read'] });
  t.equal((await post(app, '/rerank', { model: 'cross', query: 'q', documents: ['a'] }, reader)).status, 403, 'models:read does not grant inference');
});
