/**
 * The pure parts of reranking: the rerank body's documents and answer (plugins/api-openai/rerank.ts)
 * and how an ONNX folder's config.json and logits read (plugins/backend-transformers/head.ts).
 */
import t from 'tap';
import { documentTexts, rerankAnswer, type RerankBody } from '../../plugins/api-openai/rerank.js';
import { headOf, relevance } from '../../plugins/backend-transformers/head.js';

t.test('documents: strings, {text}, rank_fields; an object without text is a 400 naming it', async (t) => {
  t.same(documentTexts({ model: 'm', query: 'q', documents: ['a', { text: 'b', id: 1 }] }), ['a', 'b']);
  t.same(documentTexts({ model: 'm', query: 'q', documents: [{ title: 'T', n: 2 }], rank_fields: ['title', 'n'] }), ['title: T\nn: 2']);
  const err = (() => {
    try {
      documentTexts({ model: 'm', query: 'q', documents: ['a', { title: 'T' }] });
    } catch (e) {
      return e;
    }
    return null;
  })();
  t.match(err, { statusCode: 400, param: 'documents[1]', message: /needs a "text" string/ });
});

t.test('the answer: best first, ties in document order, top_n, documents when asked', async (t) => {
  const body: RerankBody = { model: 'm', query: 'q', documents: ['a', { text: 'b', x: 1 }, 'c', 'd'], top_n: 3 };
  const answer = rerankAnswer(body, { model: 'm:latest', scores: [0.2, 0.9, 0.2, 0.5], promptTokens: 40 }, true);
  t.same(answer.results, [
    { index: 1, relevance_score: 0.9, document: { text: 'b', x: 1 } },
    { index: 3, relevance_score: 0.5, document: { text: 'd' } },
    { index: 0, relevance_score: 0.2, document: { text: 'a' } },
  ]);
  t.same(answer.usage, { prompt_tokens: 40, total_tokens: 40 });
  t.same(
    rerankAnswer({ ...body, top_n: null }, { model: 'm', scores: [0.1, 0.3, 0.2, 0.0], promptTokens: 1 }, false).results.map((r) => Object.keys(r)),
    [
      ['index', 'relevance_score'],
      ['index', 'relevance_score'],
      ['index', 'relevance_score'],
      ['index', 'relevance_score'],
    ],
  );
});

t.test('an ONNX head: sequence classifiers rerank; one logit is a sigmoid, two a softmax', async (t) => {
  t.same(headOf({ architectures: ['BertModel'] }), { kind: 'encoder' });
  t.same(headOf({}), { kind: 'encoder' });
  t.same(headOf({ architectures: ['XLMRobertaForSequenceClassification'], id2label: { 0: 'LABEL_0' } }), { kind: 'cross-encoder', labels: 1 });
  t.same(headOf({ architectures: ['BertForSequenceClassification'], num_labels: 2 }), { kind: 'cross-encoder', labels: 2 });
  t.equal(relevance([0]), 0.5);
  t.ok(Math.abs(relevance([2]) - 1 / (1 + Math.exp(-2))) < 1e-12);
  t.ok(Math.abs(relevance([1, 3]) - Math.exp(3) / (Math.exp(1) + Math.exp(3))) < 1e-12);
  t.ok(relevance([1000, -1000]) >= 0, 'no overflow');
});

t.test('a fixture builder without its Python modules fails saying what to install', async (t) => {
  const { python } = await import('../../scripts/fixtures/tools.js');
  t.throws(
    () => python(['numpy', 'no_such_module_lia'], 'building tiny-x', { ...process.env, LIA_PYTHON: 'python3' }),
    /building tiny-x needs Python 3 with numpy and no_such_module_lia \(Debian: apt-get install python3-numpy python3-no_such_module_lia; or set LIA_PYTHON\)/,
  );
  t.throws(() => python(['numpy'], 'building tiny-x', { ...process.env, LIA_PYTHON: 'no-such-python-lia' }), /Tried no-such-python-lia: not found/);
});
